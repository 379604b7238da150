"""A download whose process is stopped is taken over (``_stall``), with real processes.

A forked child starts a download (slowed by ``FolderStorage(delay=...)``) and is SIGSTOPped while
it holds the chunk's lock; this process, wanting the same chunk, takes it over after
``LITDATA_DOWNLOAD_STALL_S`` and publishes its copy. The child, resumed, finds that copy, keeps
it, and takes back only its own reservation: one copy, a right ledger, no lock or staging left.
Before the takeover existed, the wait for the stopped child never ended (the test's timeout).
"""

from __future__ import annotations

import fcntl
import importlib
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from litdata_format import ChunkInfo
from litdata_io._cache._chunk_cache import ChunkCache
from litdata_io._cache._clear import clear_cache

FolderStorage: Any = importlib.import_module("_folder_storage").FolderStorage
FORK = multiprocessing.get_context("fork")
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")


def _child(root: Path, src: Path, info: ChunkInfo, out: Path) -> None:
    cache = ChunkCache(root, FolderStorage(src, delay=3.0), "1MB")
    with cache.use(info) as path:
        out.write_bytes(path.read_bytes())


def _stop_when_downloading(pid: int, lock: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _reserved(lock) and _ledger_free(lock.parent):  # it downloads (and is out of the ledger)
            os.kill(pid, signal.SIGSTOP)
            return
        time.sleep(0.01)
    raise AssertionError("the child never started its download")


def _ledger_free(root: Path) -> bool:
    """Whether the folder's ledger exists and nobody holds it.

    A download reserves, then updates the ledger and evicts under its lock, then fetches: stopped
    only once out of the ledger, the child is stopped downloading (test_cache_ledger stops one in it).
    """
    try:
        fd = os.open(root / ".cache-bytes", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@pytest.mark.timeout(120)
def test_a_stopped_download_is_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = os.urandom(5000)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "chunk-0-0.bin").write_bytes(data)
    info = ChunkInfo("chunk-0-0.bin", len(data), 1)
    root = tmp_path / "ds"
    child = FORK.Process(target=_child, args=(root, tmp_path / "src", info, tmp_path / "child.out"))
    child.start()
    pid = child.pid
    assert pid is not None
    try:
        lock = root / ".chunk-0-0.bin.lock"
        _stop_when_downloading(pid, lock)
        inode = lock.stat().st_ino
        monkeypatch.setenv("LITDATA_DOWNLOAD_STALL_S", "0.5")
        cache = ChunkCache(root, FolderStorage(tmp_path / "src"), "1MB")
        with cache.use(info) as path:  # before the takeover: waited for the stopped child for ever
            assert path.read_bytes() == data
        taken = root / f".chunk-0-0.bin.taken-{inode}.lock"
        assert taken.exists() and taken.read_text().split()[1] == str(pid)  # still the child's
        assert (root / f".chunk-0-0.bin.{inode}.partial").is_dir()  # kept: the child may resume
        os.kill(pid, signal.SIGCONT)
        child.join(60)
        assert child.exitcode == 0
        assert (tmp_path / "child.out").read_bytes() == data
        assert sorted(os.listdir(root)) == [".cache-bytes", "chunk-0-0.bin"]
        assert int((root / ".cache-bytes").read_text().split()[0]) == len(data)
    finally:
        if child.is_alive():
            os.kill(pid, signal.SIGCONT)
            child.kill()
            child.join()


def test_clear_keeps_what_a_stopped_download_holds(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    root.mkdir()
    lock = root / ".chunk-0-0.bin.lock"
    lock.write_text("10 1 elsewhere")
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a stopped holder's, moved aside by a takeover
    inode = os.fstat(fd).st_ino
    taken = root / f".chunk-0-0.bin.taken-{inode}.lock"
    os.rename(lock, taken)
    staging = root / f".chunk-0-0.bin.{inode}.partial"
    staging.mkdir()
    (staging / "chunk-0-0.bin").write_bytes(b"half")
    stale = root / ".chunk-0-0.bin.99.partial"  # a crashed download's
    stale.mkdir()
    try:
        result = clear_cache(root)
        assert sorted(result.in_use) == sorted([staging, taken])
        assert not stale.exists()
    finally:
        os.close(fd)
    clear_cache(root)
    assert not root.exists()


def test_the_stall_bound_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from litdata_io._cache._stall import download_stall_seconds

    monkeypatch.setenv("LITDATA_DOWNLOAD_STALL_S", "soon")
    with pytest.raises(ValueError, match="LITDATA_DOWNLOAD_STALL_S='soon'"):
        download_stall_seconds()
    monkeypatch.setenv("LITDATA_DOWNLOAD_STALL_S", "0")
    assert download_stall_seconds() == 0
    monkeypatch.delenv("LITDATA_DOWNLOAD_STALL_S")
    assert download_stall_seconds() == 30


def _hold_two(root: Path, src: Path, infos: tuple[ChunkInfo, ChunkInfo]) -> None:
    import asyncio

    cache = ChunkCache(root, FolderStorage(src, delay=3.0), "1MB")

    async def both() -> None:
        await asyncio.gather(*(cache.aacquire(info) for info in infos))

    asyncio.run(both())


@pytest.mark.timeout(120)
def test_a_process_stopped_holding_two_chunks_is_waited_for_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The soak's failure: a reader needing, one after the other, two chunks whose downloads one
    # stopped process held waited the whole bound for each (2 x 15 s on top of a slow start there,
    # past the watchdog's 60 s). The holder made no progress during the first wait: the second
    # takes it over at once. Before the fix the second wait took the whole bound again.
    stall_s = 4.0
    src = tmp_path / "src"
    src.mkdir()
    blobs = [os.urandom(4000 + i) for i in range(2)]
    infos = tuple(ChunkInfo(f"chunk-0-{i}.bin", len(blob), 1) for i, blob in enumerate(blobs))
    for info, blob in zip(infos, blobs, strict=True):
        (src / info.filename).write_bytes(blob)
    root = tmp_path / "ds"
    child = FORK.Process(target=_hold_two, args=(root, src, infos))
    child.start()
    pid = child.pid
    assert pid is not None
    try:
        locks = [root / f".{info.filename}.lock" for info in infos]
        deadline = time.monotonic() + 60
        while not (all(_reserved(lock) for lock in locks) and _ledger_free(root)):  # both downloads under way
            assert time.monotonic() < deadline, "the child never started both downloads"
            time.sleep(0.01)
        os.kill(pid, signal.SIGSTOP)
        monkeypatch.setenv("LITDATA_DOWNLOAD_STALL_S", str(stall_s))
        cache = ChunkCache(root, FolderStorage(src), "1MB")
        with cache.use(infos[0]) as path:  # waits the bound, then takes the first download over
            assert path.read_bytes() == blobs[0]
        started = time.monotonic()
        with cache.use(infos[1]) as path:  # the same stopped holder: no second full wait
            assert path.read_bytes() == blobs[1]
        assert time.monotonic() - started < stall_s / 2
        os.kill(pid, signal.SIGCONT)
        child.join(60)
        assert child.exitcode == 0
        cache.close()
        assert sorted(os.listdir(root)) == [".cache-bytes", *(info.filename for info in infos)]
        assert int((root / ".cache-bytes").read_text().split()[0]) == sum(len(blob) for blob in blobs)
    finally:
        if child.is_alive():
            os.kill(pid, signal.SIGCONT)
            child.kill()
            child.join()


def _reserved(lock: Path) -> bool:
    try:
        fields = lock.read_text().split()
    except FileNotFoundError:
        return False
    return bool(fields) and fields[0].isdigit() and int(fields[0]) > 0
