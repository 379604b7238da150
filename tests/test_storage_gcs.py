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


_EMULATOR_SCRIPT = """
import os, sys
import litdata as ld

def square(i):
    return {"i": i, "sq": i * i}

if __name__ == "__main__":
    url = sys.argv[1]
    ld.optimize(fn=square, inputs=list(range(40)), output_dir=url, chunk_size=8, num_workers=2, verbose=False)
    ds = ld.StreamingDataset(url, cache_dir=sys.argv[2])
    assert [s["sq"] for s in ds] == [i * i for i in range(40)], [s["sq"] for s in ds]
    loader = ld.StreamingDataLoader(ld.StreamingDataset(url, cache_dir=sys.argv[3]), batch_size=10, num_workers=2)
    assert sorted(int(i) for b in loader for i in b["i"]) == list(range(40))
    print("ok")
"""


@pytest.mark.parametrize("host_form", ["url", "host:port"])
def test_storage_emulator_host_is_honoured(tmp_path: Any, fake_gcs: FakeGcsServer, host_form: str) -> None:
    """``STORAGE_EMULATOR_HOST`` alone (no credentials, no storage_options): optimize into gs:// and read it back."""
    import os
    import subprocess
    import sys

    bucket = fake_gcs.create_bucket()
    script = tmp_path / "emulated.py"
    script.write_text(_EMULATOR_SCRIPT)
    host = fake_gcs.endpoint if host_form == "url" else fake_gcs.endpoint.removeprefix("http://")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCE_"))}
    env.update(STORAGE_EMULATOR_HOST=host, GCE_METADATA_HOST="127.0.0.1:9", GCE_METADATA_IP="127.0.0.1:9")
    proc = subprocess.run(
        [sys.executable, str(script), f"gs://{bucket}/data", str(tmp_path / "c1"), str(tmp_path / "c2")],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-5000:]
