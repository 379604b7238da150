"""The conformance suite on Google Cloud Storage (fake-gcs-server on 127.0.0.1).

obstore reads the emulator but cannot write to it (the emulator rejects its XML-API uploads), so the
obstore class is read-only and seeds objects through gcsfs; writing gs:// goes through litdata-io's
fsspec backend (``storage_options["backend"] = "fsspec"``, i.e. gcsfs), tested in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from litdata_io import Storage, get_storage
from tests import servers_extra
from tests.servers_extra import FakeGcsServer
from tests.storage_conformance import StorageConformance, StorageFactory

pytestmark = pytest.mark.cloud

fake_gcs = servers_extra.fake_gcs  # the session fixture, bound here so pytest finds it


def _gcsfs(server: FakeGcsServer) -> Any:
    import gcsfs

    return gcsfs.GCSFileSystem(**server.gcsfs_options(), skip_instance_cache=True)


class TestGcsStorage(StorageConformance):
    """obstore's GCSStore with gcsfs-style options (``endpoint_url``, ``token="anon"``, ``project``)."""

    writable = False

    @pytest.fixture
    def bucket(self, fake_gcs: FakeGcsServer) -> str:
        return fake_gcs.create_bucket()

    @pytest.fixture
    def storage_factory(self, fake_gcs: FakeGcsServer, bucket: str) -> StorageFactory:
        def make(**options: object) -> Storage:
            return get_storage(f"gs://{bucket}/some/prefix", storage_options={**fake_gcs.gcsfs_options(), **options})

        return make

    @pytest.fixture
    def seed(self, fake_gcs: FakeGcsServer, bucket: str) -> Callable[[str, bytes], None]:
        fs = _gcsfs(fake_gcs)

        def put(key: str, data: bytes) -> None:
            fs.pipe_file(f"{bucket}/some/prefix/{key}", data)

        return put

    def test_is_obstore(self, storage: Storage) -> None:
        assert type(storage).__name__ == "ObstoreStorage"


class TestGcsFsspecStorage(StorageConformance):
    """Writing gs:// through the fsspec backend (gcsfs), read back through the same storage."""

    @pytest.fixture
    def storage_factory(self, fake_gcs: FakeGcsServer) -> StorageFactory:
        bucket = fake_gcs.create_bucket()

        def make(**options: object) -> Storage:
            return get_storage(
                f"gs://{bucket}/data",
                storage_options={**fake_gcs.gcsfs_options(), "backend": "fsspec", **options},
            )

        return make

    def test_is_fsspec(self, storage: Storage) -> None:
        assert type(storage).__name__ == "FsspecStorage"

    def test_written_objects_are_readable_through_obstore(self, storage: Storage, fake_gcs: FakeGcsServer) -> None:
        storage.put("written.bin", b"by gcsfs")
        bucket = storage.url.split("://", 1)[1].split("/", 1)[0]
        reader = get_storage(f"gs://{bucket}/data", storage_options=fake_gcs.gcsfs_options())
        assert type(reader).__name__ == "ObstoreStorage"
        assert reader.get("written.bin") == b"by gcsfs"
        assert [info.key for info in reader.list()] == ["written.bin"]
