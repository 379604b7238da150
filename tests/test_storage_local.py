"""The conformance suite on local folders, ``local:`` network-drive URLs and fsspec's memory filesystem."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from litdata_io import Storage, get_storage
from litdata_io._local import LocalStorage
from tests.storage_conformance import StorageConformance, StorageFactory

_roots = itertools.count()


class TestLocalStorage(StorageConformance):
    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        def make(**options: object) -> Storage:
            return get_storage(str(tmp_path / "root"), storage_options=options)

        return make

    def test_is_local_storage(self, storage: Storage) -> None:
        assert isinstance(storage, LocalStorage)


class TestNetworkDriveStorage(StorageConformance):
    """``local:/drive`` reads the drive like a folder; the URL keeps the ``local:`` prefix."""

    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        def make(**options: object) -> Storage:
            return get_storage(f"local:{tmp_path / 'drive'}", storage_options=options)

        return make

    def test_url_names_the_drive(self, storage: Storage, tmp_path: Path) -> None:
        assert storage.url == f"local:{tmp_path / 'drive'}"
        assert storage.url_for("a/b.bin") == f"local:{tmp_path / 'drive'}/a/b.bin"


class TestMemoryFsspecStorage(StorageConformance):
    """Any fsspec protocol works through the fsspec fallback; memory:// is the one with no server."""

    shared_between_processes = False

    @pytest.fixture
    def storage_factory(self) -> StorageFactory:
        root = f"memory://conformance{next(_roots)}/data"

        def make(**options: object) -> Storage:
            return get_storage(root, storage_options=options)

        return make

    def test_is_fsspec(self, storage: Storage) -> None:
        assert type(storage).__name__ == "FsspecStorage"
