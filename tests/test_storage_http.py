"""The conformance suite (read-only part) on plain HTTP: a small Range-aware file server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from litdata_io import Storage, StorageError, get_storage
from litdata_io.testing import StorageConformance, StorageFactory
from tests.support.http_server import serve_folder

pytestmark = pytest.mark.cloud


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    with serve_folder(root) as url:
        yield f"{url}/data", root.resolve() / "data"


class TestHTTPStorage(StorageConformance):
    writable = False

    @pytest.fixture
    def storage_factory(self, http_root: tuple[str, Path]) -> StorageFactory:
        def make(**options: object) -> Storage:
            return get_storage(http_root[0], storage_options=options)

        return make

    @pytest.fixture
    def seed(self, http_root: tuple[str, Path]) -> Callable[[str, bytes], None]:
        def write(key: str, data: bytes) -> None:
            path = http_root[1] / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        return write

    def test_list_prefix_and_recursion(self, storage: Storage, seed: Callable[[str, bytes], None]) -> None:
        with pytest.raises(StorageError):  # a plain web server has no listing API
            storage.list()

    def test_list_pages_give_the_listing_in_key_order(
        self, storage: Storage, seed: Callable[[str, bytes], None]
    ) -> None:
        with pytest.raises(StorageError):  # nor in pages
            next(iter(storage.list_pages(page_size=2)))
