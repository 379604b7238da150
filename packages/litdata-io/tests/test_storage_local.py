"""The conformance suite on local folders, ``local:`` network-drive URLs and fsspec's memory filesystem."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from litdata_io import Storage, get_storage
from litdata_io._storage._local import LocalStorage
from litdata_io.testing import StorageConformance, StorageFactory

_roots = itertools.count()


class TestLocalStorage(StorageConformance):
    @pytest.fixture
    def storage_factory(self, tmp_path: Path) -> StorageFactory:
        def make(**options: object) -> Storage:
            return get_storage(str(tmp_path / "root"), storage_options=options)

        return make

    def test_is_local_storage(self, storage: Storage) -> None:
        assert isinstance(storage, LocalStorage)

    def test_listing_skips_hidden_entries_and_does_not_follow_folder_links(self, tmp_path: Path) -> None:
        root = tmp_path / "root"
        (root / "a" / ".staging").mkdir(parents=True)
        (root / "a" / "x.bin").write_bytes(b"12")
        (root / "a" / ".x.bin.tmp").write_bytes(b"partial")  # an atomic write in progress
        (root / "a" / ".staging" / "y.bin").write_bytes(b"y")
        (root / "b.bin").write_bytes(b"b")
        (root / "loop").symlink_to(root, target_is_directory=True)
        (root / "link.bin").symlink_to(root / "b.bin")
        storage = get_storage(str(root))
        assert [(i.key, i.size) for i in storage.list()] == [("a/x.bin", 2), ("b.bin", 1), ("link.bin", 1)]
        assert [i.key for i in storage.list("a/")] == ["a/x.bin"]
        assert [i.key for i in storage.list("", recursive=False)] == ["b.bin", "link.bin"]
        assert [i.key for i in storage.list("missing/")] == []


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
