"""The read half of the conformance suite on ``hf://`` (a fake Hugging Face Hub on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from litdata_io import ReadOnlyStorageError, Storage, get_storage
from litdata_io.testing import StorageConformance, StorageFactory
from tests.support import servers_extra
from tests.support.servers_extra import HfHubServer

pytestmark = pytest.mark.cloud

hf_hub = servers_extra.hf_hub  # the session fixture, bound here so pytest finds it

TOKEN = "hf_litdataTestTokenThatMustNotLeak"


class TestHfStorage(StorageConformance):
    """A folder of a dataset repository; a fresh repository per test, seeded on the server's disk."""

    writable = False

    @pytest.fixture
    def repo(self, hf_hub: HfHubServer) -> Path:
        return hf_hub.dataset_repo()

    @pytest.fixture
    def storage_factory(self, hf_hub: HfHubServer, repo: Path) -> StorageFactory:
        url = f"hf://datasets/{repo.parent.name}/{repo.name}/some/prefix"

        def make(**options: object) -> Storage:
            return get_storage(url, storage_options={"endpoint": hf_hub.endpoint, "token": TOKEN, **options})

        return make

    @pytest.fixture
    def seed(self, repo: Path) -> Callable[[str, bytes], None]:
        def put(key: str, data: bytes) -> None:
            path = repo / "some" / "prefix" / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        return put

    @pytest.fixture
    def secrets(self) -> list[str]:
        return [TOKEN]

    def test_writes_are_refused(self, storage: Storage) -> None:
        with pytest.raises(ReadOnlyStorageError):
            storage.put("x.bin", b"x")
        with pytest.raises(ReadOnlyStorageError):
            storage.delete("x.bin")

    def test_revision_option(self, hf_hub: HfHubServer, repo: Path, seed: Callable[[str, bytes], None]) -> None:
        seed("pinned.bin", b"at main")
        url = f"hf://datasets/{repo.parent.name}/{repo.name}/some/prefix"
        storage = get_storage(url, storage_options={"endpoint": hf_hub.endpoint, "revision": "main"})
        assert storage.get("pinned.bin") == b"at main"
