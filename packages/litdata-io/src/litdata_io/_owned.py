"""Temporary files that tell whether their owner is alive, and a sweep for the ones it left behind.

A dataset's epoch record (``$TMPDIR/litdata-epoch-*``) and a loader's watchdog board
(``/dev/shm/litdata-activity-*``) are removed by their owner when done; a process killed with
SIGKILL cannot. So the owner holds an open-file-description (OFD) read lock on one byte far past
the file's content (:data:`_ALIVE`), which the kernel releases when the owner and every process it
forked holding it are gone. A file of ours whose lock can be taken is an orphan, and
:func:`owned_file` deletes such files once per process and folder. A new file is kept only if its
name still names it once locked, and a sweep deletes only a file it holds locked under its name.

OFD locks, not ``flock``: :func:`record_lock` locks the record's bytes from other descriptors
while the owner holds its lifetime lock, and byte-range locks on disjoint bytes never conflict
(mixing ``flock`` in would deadlock on NFS). Without OFD locks (not Linux), nothing is locked for
life, nothing is swept, and :func:`record_lock` uses ``flock``.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import tempfile
from collections.abc import Generator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["lifetime_locks", "owned_file", "record_lock", "sweep_orphans"]

_ALIVE = 1 << 40  # the byte the owner's lock covers: past any content these files have
_FLOCK = struct.Struct("@hhqqi")  # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks)
_OFD_SET = getattr(fcntl, "F_OFD_SETLK", None) if fcntl is not None and sys.platform == "linux" else None
_OFD_WAIT = getattr(fcntl, "F_OFD_SETLKW", None) if _OFD_SET is not None else None
_swept: set[tuple[str, str]] = set()  # (folder, prefix) this process swept already


def lifetime_locks() -> bool:
    """Whether this platform has the locks that tell a live owner's file from an orphan."""
    return _OFD_SET is not None


def _lock(fd: int, kind: int, start: int, length: int, wait: bool) -> bool:
    """An OFD lock of ``kind`` (``F_RDLCK``/``F_WRLCK``/``F_UNLCK``) on bytes ``[start, start+length)``.

    Returns False when ``wait`` is False and another open file holds a conflicting lock.
    """
    assert fcntl is not None and _OFD_SET is not None and _OFD_WAIT is not None
    request = _FLOCK.pack(kind, os.SEEK_SET, start, length, 0)
    try:
        fcntl.fcntl(fd, _OFD_WAIT if wait else _OFD_SET, request)
    except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: held elsewhere
        return False
    return True


def _same_file(fd: int, path: str) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def owned_file(prefix: str, directory: str | None = None) -> tuple[int, str]:
    """Make a file ``{directory}/{prefix}XXXXXXXX`` (default: the temp folder) held alive by this process.

    Returns a read-write descriptor (not inherited by ``exec``) and the path. The descriptor holds
    the file's lifetime lock (where :func:`lifetime_locks`): keep it open while the file is in use
    and close it only after deleting the file. Orphans of the same prefix in the folder are swept
    first, once per process (:func:`sweep_orphans`).
    """
    folder = directory if directory is not None else tempfile.gettempdir()
    if (folder, prefix) not in _swept:
        _swept.add((folder, prefix))
        sweep_orphans(prefix, folder)
    while True:
        fd, path = tempfile.mkstemp(prefix=prefix, dir=folder)
        if _OFD_SET is None:
            return fd, path
        assert fcntl is not None
        if _lock(fd, fcntl.F_RDLCK, _ALIVE, 1, wait=False) and _same_file(fd, path):
            return fd, path
        os.close(fd)  # a sweep took it while it was unlocked (and deletes it): make another


def sweep_orphans(prefix: str, directory: str | None = None) -> int:
    """Delete the files ``{directory}/{prefix}*`` whose owners are gone; how many were deleted.

    A file is an orphan when its lifetime lock can be taken. Files of other users are left alone.
    Without lifetime locks (:func:`lifetime_locks` is False), nothing is deleted.
    """
    if _OFD_SET is None:
        return 0
    assert fcntl is not None
    folder = directory if directory is not None else tempfile.gettempdir()
    try:
        names = [entry.name for entry in os.scandir(folder) if entry.name.startswith(prefix)]
    except OSError:
        return 0
    deleted = 0
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # gone meanwhile, another user's, not a file
            continue
        try:
            if _lock(fd, fcntl.F_WRLCK, _ALIVE, 1, wait=False) and _same_file(fd, path):
                os.unlink(path)
                deleted += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return deleted


@contextlib.contextmanager
def record_lock(fd: int, length: int) -> Generator[None, None, None]:
    """Hold an exclusive lock on the first ``length`` bytes of the open file ``fd`` for the block.

    Processes updating a record in a file made by :func:`owned_file` take it on their own
    descriptors; it never conflicts with the owner's lifetime lock. Waits while another holds it.
    """
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    if _OFD_SET is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return
    _lock(fd, fcntl.F_WRLCK, 0, length, wait=True)
    try:
        yield
    finally:
        _lock(fd, fcntl.F_UNLCK, 0, length, wait=False)
