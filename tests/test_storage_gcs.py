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
from litdata_io.testing import StorageConformance, StorageFactory
from tests.support import servers_extra
from tests.support.servers_extra import FakeGcsServer

pytestmark = pytest.mark.cloud

fake_gcs = servers_extra.fake_gcs  # the session fixture, bound here so pytest finds it


def _gcsfs(server: FakeGcsServer) -> Any:
    from gcsfs.core import GCSFileSystem  # the plain class: the emulator cannot answer the default class's gRPC probe

    return GCSFileSystem(**server.gcsfs_options(), skip_instance_cache=True)


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


def test_only_google_endpoints_get_gcsfs_probing_class(fake_gcs: FakeGcsServer) -> None:
    """gcsfs's default class asks Google's storage-control gRPC API for each bucket's layout; an
    emulator cannot answer it (~30 s per call), so any other endpoint gets the plain class."""
    import gcsfs
    from gcsfs.core import GCSFileSystem

    def filesystem(endpoint: str) -> Any:
        options = {**fake_gcs.gcsfs_options(), "endpoint_url": endpoint, "backend": "fsspec"}
        storage: Any = get_storage("gs://bucket/data", storage_options=options)
        return storage._filesystem()[0]

    for endpoint in (fake_gcs.endpoint, fake_gcs.endpoint.removeprefix("http://")):
        assert type(filesystem(endpoint)) is GCSFileSystem
    # Google's own endpoint: whatever gcsfs picks (its zonal-bucket support when that is on).
    assert type(filesystem("https://storage.googleapis.com")) is gcsfs.GCSFileSystem


_EMULATOR_SCRIPT = """
import json, os, sys, traceback
import litdata as ld

def square(i):
    return {"i": i, "sq": i * i}

def optimize(url):
    ld.optimize(fn=square, inputs=list(range(40)), output_dir=url, chunk_size=8, num_workers=2, verbose=False)

def read(url, caches):
    ds = ld.StreamingDataset(url, cache_dir=caches[0])
    assert [s["sq"] for s in ds] == [i * i for i in range(40)], [s["sq"] for s in ds]
    loader = ld.StreamingDataLoader(ld.StreamingDataset(url, cache_dir=caches[1]), batch_size=10, num_workers=2)
    assert sorted(int(i) for b in loader for i in b["i"]) == list(range(40))

if __name__ == "__main__":
    forms = json.loads(sys.argv[1])
    errors = {name: None for name in forms}
    # Both optimize runs first: torch is not loaded yet, so each forks its workers as a script's first
    # optimize does; then each form's reads. Every step sets its form's variable alone.
    for step in (optimize, read):
        for name, form in forms.items():
            if errors[name] is None:
                os.environ["STORAGE_EMULATOR_HOST"] = form["host"]
                try:
                    step(form["url"], *([form["caches"]] if step is read else []))
                except Exception:
                    errors[name] = traceback.format_exc()
    print(json.dumps(errors))
"""


@pytest.fixture(scope="module")
def emulator_forms(fake_gcs: FakeGcsServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both forms of ``STORAGE_EMULATOR_HOST`` in one script run, each against an emulator of its own.

    The ``url`` form names the session's emulator, the ``host:port`` form a second one, and each
    form's bucket exists only on its emulator: a process that kept the first value it read would
    send the other form's requests to an emulator without its bucket, and that form would fail.
    Returns the script's exit code, its stderr and each form's error (None: optimized and read back).
    """
    import json
    import os
    import subprocess
    import sys

    from tests.support.servers_extra import start_fake_gcs

    folder = tmp_path_factory.mktemp("emulated")
    script = folder / "emulated.py"
    script.write_text(_EMULATOR_SCRIPT)
    # STORAGE_EMULATOR_HOST alone, as a user sets it: no GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false either.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCE_", "STORAGE_EMULATOR_", "GCSFS_"))}
    env.update(GCE_METADATA_HOST="127.0.0.1:9", GCE_METADATA_IP="127.0.0.1:9")
    with start_fake_gcs() as second:
        servers = {"url": fake_gcs, "host:port": second}
        hosts = {"url": fake_gcs.endpoint, "host:port": second.endpoint.removeprefix("http://")}
        forms = {
            name: {
                "host": hosts[name],
                "url": f"gs://{server.create_bucket()}/data",
                "caches": [str(folder / f"{n}-{i}") for i in (1, 2)],
            }
            for n, (name, server) in enumerate(servers.items())
        }
        proc = subprocess.run(
            [sys.executable, str(script), json.dumps(forms)],
            check=False, cwd=folder, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    errors = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}
    return {"code": proc.returncode, "stderr": proc.stderr, "errors": errors}


# gcsfs's default class probes each bucket over gRPC, which an emulator cannot answer: ~30 s per call,
# 460 s for this script's optimize. Without the probe the module fixture takes seconds.
@pytest.mark.timeout(240)
@pytest.mark.parametrize("host_form", ["url", "host:port"])
def test_storage_emulator_host_is_honoured(emulator_forms: dict[str, Any], host_form: str) -> None:
    """``STORAGE_EMULATOR_HOST`` alone (no credentials, no storage_options): optimize into gs:// and read it back."""
    assert emulator_forms["code"] == 0, emulator_forms["stderr"][-5000:]
    assert emulator_forms["errors"][host_form] is None, emulator_forms["errors"][host_form]
