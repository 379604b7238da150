"""A process stopped while it holds the cache's ledger (``.cache-bytes``) is taken over, with real processes.

A forked child reads a dataset through a small cache and stops itself (SIGSTOP) inside the real
code while it holds the ledger's lock (the test patches the child only): in the middle of an
eviction (before deleting a chunk), or of a ledger update (before writing the new total). This
process, reading the same dataset through the same folder, must get every chunk once within
``LITDATA_DOWNLOAD_STALL_S`` and a margin; the child, resumed, finishes its own reading, and the
ledger still counts at least what the folder holds (what the cap relies on), with nothing left
behind. Before the takeover
existed, every read here waited for the stopped child for ever (the test's timeout).
"""

from __future__ import annotations

import fcntl
import importlib
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from litdata_format import ChunkInfo
from litdata_io._cache._chunk_cache import ChunkCache

FolderStorage: Any = importlib.import_module("_folder_storage").FolderStorage
FORK = multiprocessing.get_context("fork")
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
CHUNKS = 12
SIZE = 4000
CAP = 5 * SIZE  # the reads evict: 12 chunks through room for 5


def _read_all(cache: ChunkCache, infos: list[ChunkInfo], src: Path) -> list[str]:
    """Read every chunk once, as a reader of the dataset does; the chunks whose bytes were wrong."""
    wrong = []
    for info in infos:
        with cache.use(info) as path:
            if path.read_bytes() != (src / info.filename).read_bytes():
                wrong.append(info.filename)
        cache.mark_consumed(info)
    return wrong


def _child(where: str, root: Path, src: Path, infos: list[ChunkInfo], out: Path) -> None:
    """Reads the dataset, stopping itself once inside the ledger's lock at ``where``."""
    import litdata_io._cache._chunk_cache as cache_module

    stopped: list[bool] = []

    def stop_once() -> None:
        if not stopped:
            stopped.append(True)
            # To this thread: os.kill(getpid()) may wake another thread to stop the process, and
            # this one runs on (out of the ledger) until that thread is scheduled.
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)

    if where == "evict":  # holding the ledger while it counts the folder, before deleting a chunk
        from litdata_io._cache._locks import delete_if_unused as delete

        def stop_then_delete(path: Path) -> bool:
            stop_once()
            return delete(path)

        cache_module.delete_if_unused = stop_then_delete  # type: ignore[assignment]
    else:  # holding the ledger in an update, with the total read and not yet written back
        import litdata_io._cache._ledger as ledger_module

        write = ledger_module.write_ledger

        def stop_then_write(fd: int, total: int, counted: float) -> None:
            stop_once()
            write(fd, total, counted)

        ledger_module.write_ledger = stop_then_write  # type: ignore[assignment]
    wrong = _read_all(ChunkCache(root, FolderStorage(src), CAP), infos, src)
    out.write_text(f"{len(stopped)} {' '.join(wrong)}")


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("where", ["evict", "add"])
def test_a_process_stopped_holding_the_ledger_is_taken_over(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stall_s = 1.5  # the holder is stopped, so any bound proves the takeover; a short one keeps the test short
    src = tmp_path / "src"
    src.mkdir()
    infos = []
    for i in range(CHUNKS):
        (src / f"chunk-0-{i}.bin").write_bytes(os.urandom(SIZE))
        infos.append(ChunkInfo(f"chunk-0-{i}.bin", SIZE, 1))
    root = tmp_path / "ds"
    ledger = root / ".cache-bytes"
    out = tmp_path / "child.out"
    child = FORK.Process(target=_child, args=(where, root, src, infos, out))
    child.start()
    pid = child.pid
    assert pid is not None
    try:
        deadline = time.monotonic() + 60
        while _state(pid) != "T":
            assert time.monotonic() < deadline and child.is_alive(), "the child never stopped in the ledger"
            time.sleep(0.01)
        probe = os.open(ledger, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # the stopped child holds it
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            stopped_inode = os.fstat(probe).st_ino
        finally:
            os.close(probe)
        monkeypatch.setenv("LITDATA_DOWNLOAD_STALL_S", str(stall_s))
        cache = ChunkCache(root, FolderStorage(src), CAP)
        started = time.monotonic()
        assert _read_all(cache, infos, src) == []  # every chunk, once, right
        took = time.monotonic() - started
        assert took < stall_s + 30, f"reading took {took:.1f} s with the ledger's holder stopped"
        assert ledger.stat().st_ino != stopped_inode  # taken over: a fresh ledger file
        os.kill(pid, signal.SIGCONT)
        child.join(60)
        assert child.exitcode == 0
        assert out.read_text().strip() == "1"  # it did stop inside the ledger, and then read every chunk right
        cache.close()
        names = sorted(os.listdir(root))
        assert all(name == ".cache-bytes" or name.startswith("chunk-0-") for name in names), names
        on_disk = sum((root / name).stat().st_size for name in names if name.startswith("chunk-"))
        total = int(ledger.read_text().split()[0])
        assert total >= on_disk, f"the ledger counts {total} bytes, the folder holds {on_disk}"
        assert on_disk <= CAP + SIZE  # the cap held (one chunk may be in use past it)
    finally:
        if child.is_alive():
            os.kill(pid, signal.SIGCONT)
            child.kill()
            child.join()
