"""The cache's version subfolders (one per dataset URL and index) and its check of chunk sizes."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from litdata_format import ChunkInfo
from litdata_io import ChunkCache, ChunkDownloadError, dataset_version


def _load_folder_storage() -> Any:
    name = "_litdata_io_tests_folder_storage"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("_folder_storage.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].FolderStorage


FolderStorage = _load_folder_storage()


@pytest.fixture(autouse=True)
def _no_cache_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAX_CACHE_SIZE", raising=False)


def _chunks(folder: Path, count: int = 2, size: int = 5000) -> list[ChunkInfo]:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"chunk-0-{i}.bin").write_bytes(os.urandom(size))
    return [ChunkInfo(f"chunk-0-{i}.bin", size, 1) for i in range(count)]


def _downloads(log: Path) -> list[str]:
    return [line.split()[1] for line in log.read_text().splitlines()] if log.exists() else []


# -- sizes --------------------------------------------------------------------------------------------
def test_truncated_cached_chunk_is_fetched_again(tmp_path: Path) -> None:
    infos = _chunks(tmp_path / "src")
    log = tmp_path / "log"
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", log=log), "1GB")
    want = (tmp_path / "src" / "chunk-0-0.bin").read_bytes()
    with cache.use(infos[0]) as path:
        assert path.read_bytes() == want
    os.truncate(path, 1234)  # what a crash without fsync can leave
    assert not cache.is_cached(infos[0])
    with cache.use(infos[0]) as again:
        assert again == path and again.read_bytes() == want
    assert _downloads(log) == ["chunk-0-0.bin", "chunk-0-0.bin"]

    os.truncate(path, 10)
    assert cache.ensure(infos[0]).read_bytes() == want  # the unpinned path checks too
    assert _downloads(log).count("chunk-0-0.bin") == 3
    with cache.use(infos[0]):
        pass
    assert _downloads(log).count("chunk-0-0.bin") == 3  # whole now: used as it is


def test_chunk_of_the_wrong_size_fails_naming_chunk_url_and_sizes(tmp_path: Path) -> None:
    infos = _chunks(tmp_path / "src", count=1, size=5000)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), "1GB")
    with cache.use(infos[0]) as path:
        pass
    # The dataset is rewritten in place with a shorter chunk while the old index is in use.
    (tmp_path / "src" / "chunk-0-0.bin").write_bytes(os.urandom(3000))
    os.truncate(path, 100)
    with pytest.raises(ChunkDownloadError, match=r"chunk-0-0\.bin \(test://src/chunk-0-0\.bin\) has 3000 bytes.*5000"):
        cache.acquire(infos[0])
    assert not path.exists()  # neither the truncated copy nor the wrong download is left
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")] == []


def test_older_upstream_sizes_without_the_header_are_accepted(tmp_path: Path) -> None:
    # Upstream writers before October 2024 left the header (4 * (items + 2) bytes) out of chunk_bytes.
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "chunk-0-0.bin").write_bytes(os.urandom(4 * (3 + 2) + 90))
    log = tmp_path / "log"
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", log=log), "1GB")
    info = ChunkInfo("chunk-0-0.bin", 90, 3)
    for _ in range(2):
        with cache.use(info):
            pass
    assert _downloads(log) == ["chunk-0-0.bin"]


# -- versions -----------------------------------------------------------------------------------------
def test_dataset_version_tells_urls_and_indexes_apart() -> None:
    index = b'{"chunks": [], "config": {}}'
    version = dataset_version("s3://b/data", index)
    assert version == dataset_version("s3://b/data/", index) and version.startswith("v-")
    assert version != dataset_version("s3://b/other", index)
    assert version != dataset_version("s3://b/data", index + b" ")


@pytest.mark.parametrize("bad", [".hidden", "a/b", "..", ""])
def test_a_version_must_be_one_visible_folder_name(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="cache version"):
        ChunkCache(tmp_path / "cache", FolderStorage(tmp_path), "1GB", version=bad)


def test_a_new_version_clears_the_old_one_but_not_chunks_in_use_nor_other_urls(tmp_path: Path) -> None:
    infos = _chunks(tmp_path / "src")
    other = _chunks(tmp_path / "other")
    root = tmp_path / "cache"
    old = ChunkCache(root, FolderStorage(tmp_path / "src"), "1GB", version="v-old")
    neighbour = ChunkCache(root, FolderStorage(tmp_path / "other"), "1GB", version="v-other")
    assert old.path_for(infos[0]) == root / "v-old" / "chunk-0-0.bin"
    pinned = old.acquire(infos[0])
    old.ensure(infos[1])
    neighbour.ensure(other[0])
    (root / "v-old" / "index.json").write_text("{}")

    new = ChunkCache(root, FolderStorage(tmp_path / "src"), "1GB", version="v-new")
    assert sorted(p.name for p in (root / "v-old").iterdir()) == [".source-url", "chunk-0-0.bin"]  # in use
    assert (root / "v-other" / "chunk-0-0.bin").is_file()  # another dataset sharing the folder
    with new.use(infos[0]) as path:
        assert path == root / "v-new" / "chunk-0-0.bin" and path.read_bytes() == pinned.read_bytes()
    old.release(infos[0])

    ChunkCache(root, FolderStorage(tmp_path / "src"), "1GB", version="v-new")
    assert not (root / "v-old").exists()
    assert (root / "v-other" / "chunk-0-0.bin").is_file() and (root / "v-new" / "chunk-0-0.bin").is_file()


def test_the_cap_covers_every_version_in_the_folder(tmp_path: Path) -> None:
    infos = _chunks(tmp_path / "src", count=4, size=1000)
    other = _chunks(tmp_path / "other", count=4, size=1000)
    root = tmp_path / "cache"
    a = ChunkCache(root, FolderStorage(tmp_path / "src"), 5000, version="v-a")
    b = ChunkCache(root, FolderStorage(tmp_path / "other"), 5000, version="v-b")
    for info in infos:
        a.ensure(info)
    for info in other:
        b.ensure(info)
    assert a.size() == b.size() <= 5000
    assert len(list(root.rglob("chunk-*.bin"))) <= 5
