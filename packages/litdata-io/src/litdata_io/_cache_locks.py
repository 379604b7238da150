"""File locks of the chunk cache: pins on chunk files and per-chunk download locks (``flock``).

A reader pins a chunk by holding ``LOCK_SH`` on the chunk file; eviction takes ``LOCK_EX |
LOCK_NB`` before unlinking, so it fails while anyone reads. A download holds ``LOCK_EX`` on
``.{name}.lock`` and deletes that file before releasing it; while it holds it, the file says how
many bytes the download will add (its reservation), which only counts while the lock is held.
Every locker checks after locking that the path still names the inode it locked (the file may
have been deleted or replaced while it waited), so deleted files are never trusted. The kernel
releases the locks of a dead process. Without ``fcntl`` (Windows) the locks are no-ops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path

from litdata_io._tracer import trace_span

LOCK_SUFFIX = ".lock"  # a download's lock: ``.{chunk}.lock``
STAGING_SUFFIX = ".partial"  # a download's staging folder: ``.{chunk}.partial``
LEDGER = ".cache-bytes"  # the folder's byte count (see ``_cache``)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "EX",
    "LEDGER",
    "LOCK_SUFFIX",
    "NB",
    "SH",
    "STAGING_SUFFIX",
    "delete_if_unused",
    "flock",
    "lock_exclusive",
    "lock_exclusive_async",
    "open_pinned",
    "release_lock_file",
    "reservation",
    "reserve",
    "same_file",
]


def flock(fd: int, operation: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, operation)


SH = fcntl.LOCK_SH if fcntl is not None else 0
EX = fcntl.LOCK_EX if fcntl is not None else 0
NB = fcntl.LOCK_NB if fcntl is not None else 0


def same_file(fd: int, path: Path) -> os.stat_result | None:
    """The path's stat if ``path`` still names the file open as ``fd``, else None."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return None
    mine = os.fstat(fd)
    return on_disk if (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino) else None


def open_pinned(path: Path) -> int | None:
    """Open ``path`` holding a shared lock on it, or None if it is not (or no longer) there."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        # Blocking is fine: an evictor holds LOCKEX only for the few microseconds of an unlink.
        flock(fd, SH)
        stat = same_file(fd, path)
        if stat is None:
            os.close(fd)
            return None
        if stat.st_mtime_ns == 0:  # consumed earlier, wanted again: it is recent once more
            with contextlib.suppress(OSError):
                os.utime(path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def delete_if_unused(path: Path) -> bool:
    """Delete ``path`` unless some process holds a lock on it; True if it was deleted."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        try:
            flock(fd, EX | NB)
        except BlockingIOError:
            return False
        if same_file(fd, path) is None:
            return False
        path.unlink()
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(fd)


def _open_lock_file(path: Path) -> int:
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except FileNotFoundError:  # the folder was removed (cache clear): make it again
            path.parent.mkdir(parents=True, exist_ok=True)


def lock_exclusive(path: Path, blocking: bool = True) -> int | None:
    """Hold ``LOCKEX`` on the lock file ``path`` (created if needed); None if busy and not blocking."""
    while True:
        fd = _open_lock_file(path)
        try:
            flock(fd, EX if blocking else EX | NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if same_file(fd, path) is not None:
            return fd
        os.close(fd)  # the holder deleted it while we waited: lock the current one


async def lock_exclusive_async(path: Path) -> int:
    """:func:`lock_exclusive` for async code: contended waits block a daemon thread, not the loop."""
    while True:
        fd = lock_exclusive(path, blocking=False)
        if fd is None:
            with trace_span("lock_wait", "lock", lock=path.name):
                fd = await _await_lock_in_thread(_open_lock_file(path))
            if same_file(fd, path) is None:
                os.close(fd)  # the holder deleted it while we waited: lock the current one
                continue
        return fd


async def _await_lock_in_thread(fd: int) -> int:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    handoff = threading.Lock()
    flags = {"abandoned": False, "delivered": False}

    def wait_for_lock() -> None:
        error: BaseException | None = None
        try:
            flock(fd, EX)
        except BaseException as err:
            error = err
        with handoff:
            if flags["abandoned"]:
                os.close(fd)
                return
            flags["delivered"] = True
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(_settle, done, error)

    # A daemon thread (not the loop's executor) so a stuck holder never blocks interpreter exit.
    threading.Thread(target=wait_for_lock, name="litdata-chunk-lock", daemon=True).start()
    try:
        await done
    except BaseException:
        with handoff:
            flags["abandoned"] = True
            delivered = flags["delivered"]
        if delivered:  # the thread handed the descriptor over: it is ours to close
            os.close(fd)
        raise
    return fd


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def release_lock_file(fd: int, path: Path) -> None:
    """Delete the lock file we hold, then release it (waiters notice the deletion and move on)."""
    try:
        if same_file(fd, path) is not None:
            path.unlink()
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


def reserve(fd: int, nbytes: int) -> None:
    """Record in the lock file we hold that our download will add ``nbytes`` to the cache."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d" % max(nbytes, 0), 0)


def reservation(path: Path) -> int:
    """The bytes a download holding the lock file ``path`` will add.

    0 if nobody holds it (a crashed download's leftover, or a lock being taken: its taker evicts
    for itself).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    try:
        try:
            flock(fd, SH | NB)
        except BlockingIOError:  # a download holds it
            text = os.pread(fd, 32, 0)
            return int(text) if text.isdigit() else 0
        return 0
    finally:
        os.close(fd)
