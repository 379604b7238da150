"""A cache or output folder shared by several users or jobs: a link planted where ours keeps its own
files is refused naming it, and nothing outside the folder is written, truncated or deleted.

Each case streams a real dataset through a real cache folder once (to learn the names the cache
uses), empties the cache, plants a symbolic link at one of those names pointing at a file or folder
outside, and streams again through a DataLoader worker process.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter
from litdata_prep import optimize
from litdata_stream import StreamingDataLoader, StreamingDataset

PRECIOUS = b"precious bytes that are not the cache's\n" * 4


def _dataset(tmp_path: Path) -> str:
    writer = BinaryWriter(tmp_path / "data", chunk_size=2)
    for i in range(6):
        writer.write({"i": i})
    writer.done()
    writer.merge()
    return f"local:{tmp_path / 'data'}"  # read through the cache, as a bucket is


def _read(url: str, cache: Path, workers: int = 1) -> list[int]:
    dataset = StreamingDataset(url, cache_dir=str(cache), max_cache_size="30GB")
    if not workers:
        return sorted(int(s["i"]) for s in dataset)
    loader = StreamingDataLoader(dataset, batch_size=2, num_workers=workers)
    return sorted(int(i) for batch in loader for i in batch["i"])


def _layout(tmp_path: Path) -> tuple[str, Path, Path]:
    """The dataset's URL, its folder in the cache and its version folder (emptied, to plant in)."""
    url = _dataset(tmp_path)
    cache = tmp_path / "cache"
    assert _read(url, cache, workers=0) == list(range(6))
    (folder,) = cache.iterdir()
    (version,) = (p for p in folder.iterdir() if p.is_dir())
    shutil.rmtree(cache)
    return url, folder, version


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir(exist_ok=True)
    victim.write_bytes(PRECIOUS)
    return victim


@pytest.mark.parametrize("workers", [0, 1])
def test_a_ledger_planted_as_a_link_is_refused(tmp_path: Path, workers: int) -> None:
    url, folder, _ = _layout(tmp_path)
    victim = _victim(tmp_path)
    folder.mkdir(parents=True)
    os.symlink(victim, folder / ".cache-bytes")
    with pytest.raises(OSError, match=rf"{folder}/\.cache-bytes is a symbolic link to {victim}.*planted"):
        _read(url, tmp_path / "cache", workers)
    assert victim.read_bytes() == PRECIOUS


def test_a_lock_file_planted_as_a_link_is_refused(tmp_path: Path) -> None:
    url, _, version = _layout(tmp_path)
    victim = _victim(tmp_path)
    version.mkdir(parents=True)
    os.symlink(victim, version / ".chunk-0-0.bin.lock")
    with pytest.raises(OSError, match=r"\.chunk-0-0\.bin\.lock is a symbolic link to .*victim\.txt"):
        _read(url, tmp_path / "cache")
    assert victim.read_bytes() == PRECIOUS  # the old code truncated it to its reservation


def test_a_version_folder_planted_as_a_link_is_refused(tmp_path: Path) -> None:
    url, _, version = _layout(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "chunk-0-0.bin").write_bytes(PRECIOUS)  # a file of someone else's, named like a chunk
    version.parent.mkdir(parents=True)
    os.symlink(elsewhere, version)
    with pytest.raises(OSError, match=rf"{version} is a symbolic link to {elsewhere}"):
        _read(url, tmp_path / "cache")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["chunk-0-0.bin"]  # nothing written there
    assert (elsewhere / "chunk-0-0.bin").read_bytes() == PRECIOUS  # nor deleted


def test_a_chunk_planted_as_a_link_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    url, _, version = _layout(tmp_path)
    victim = _victim(tmp_path)
    version.mkdir(parents=True)
    os.symlink(victim, version / "chunk-0-0.bin")
    with pytest.raises(OSError, match=r"chunk-0-0\.bin is a symbolic link to .*victim\.txt"):
        _read(url, tmp_path / "cache")
    assert victim.read_bytes() == PRECIOUS
    assert os.stat(victim).st_mtime_ns != 0  # the old code's mark_consumed set the target's mtime to 0


def _square(i: int) -> dict[str, Any]:
    return {"i": i, "sq": i * i}


def test_checkpoints_planted_as_a_link_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))  # workers import _square
    output = tmp_path / "out"
    output.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, output / ".checkpoints")
    with pytest.raises(OSError, match=rf"{output}/\.checkpoints is a symbolic link to {elsewhere}"):
        optimize(_square, list(range(20)), str(output), chunk_size=5, num_workers=1, use_checkpoint=True)
    assert list(elsewhere.iterdir()) == []


OTHER_USER = 65534  # nobody


def _as_other_user(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    os.lchown(path, OTHER_USER, OTHER_USER)


def test_a_dataset_folder_planted_as_another_users_link_is_refused(tmp_path: Path) -> None:
    url, folder, _ = _layout(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "chunk-0-0.bin").write_bytes(PRECIOUS)
    folder.parent.mkdir(parents=True)
    os.symlink(elsewhere, folder)  # the dataset's folder in a team's cache, planted by another user
    _as_other_user(folder)
    with pytest.raises(PermissionError, match=rf"{folder} is a symbolic link to {elsewhere} made by another user"):
        _read(url, tmp_path / "cache")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["chunk-0-0.bin"]  # nothing written there


def test_a_cache_root_linked_by_another_user_is_refused_and_ones_own_link_is_not(tmp_path: Path) -> None:
    url = _dataset(tmp_path)
    disk = tmp_path / "bigger-disk"
    disk.mkdir()
    cache = tmp_path / "cache"
    os.symlink(disk, cache)  # one's own link to a bigger disk: fine
    assert _read(url, cache, workers=0) == list(range(6))
    shutil.rmtree(disk)
    disk.mkdir()
    _as_other_user(cache)
    with pytest.raises(PermissionError, match=rf"{cache} is a symbolic link to {disk} made by another user"):
        _read(url, cache, workers=0)
    assert list(disk.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_a_cache_folder_anyone_can_swap_is_refused(tmp_path: Path, mode: int) -> None:
    url = _dataset(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    if mode & 0o1000:  # sticky, as /tmp: nobody renames another's folders there
        assert _read(url, shared / "cache", workers=0) == list(range(6))
        return
    with pytest.raises(PermissionError, match=rf"{shared} is writable by every user and has no sticky bit"):
        _read(url, shared / "cache", workers=0)


def test_a_raw_datasets_cache_folder_linked_by_another_user_is_refused(tmp_path: Path) -> None:
    from litdata_raw import StreamingRawDataset

    files = tmp_path / "files"
    files.mkdir()
    (files / "a.txt").write_bytes(b"a")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "cache"
    os.symlink(elsewhere, cache)
    _as_other_user(cache)
    with pytest.raises(PermissionError, match=rf"{cache} is a symbolic link to {elsewhere} made by another user"):
        StreamingRawDataset(str(files), cache_dir=str(cache))
    assert list(elsewhere.iterdir()) == []  # its listing was not written there
