"""File locks of the chunk cache: pins on chunk files and per-chunk download locks (``flock``).

A reader pins a chunk by holding ``LOCK_SH`` on the chunk file; eviction takes ``LOCK_EX |
LOCK_NB`` before unlinking, so it fails while anyone reads. A download holds ``LOCK_EX`` on
``.{name}.lock`` and deletes that file before releasing it; while held, the file says
``<bytes> <pid> <host>``: the bytes the download will add (its reservation) and who holds it.
Every locker checks after locking that the path still names the inode it locked, so deleted files
are never trusted. Without ``fcntl`` (Windows) the locks are no-ops.

A cache folder may be shared by several users, any of whom can plant a symbolic link (or a FIFO)
where the cache keeps its files. So every file is opened with :func:`open_own` and every folder
checked with :func:`check_own_folders`: a planted link is refused naming its path.

A download stages its file in ``.{name}.{inode}.partial/``, named after the inode of its lock file.
A taken-over lock file (``_stall``) gets a second name, ``.{name}.taken-{inode}.lock``, so its
reservation still counts. A staging folder is in use while a lock file of its chunk with its inode
is held; anything else is a crashed download's leftover.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import socket
import stat as stat_mode
from pathlib import Path

LOCK_SUFFIX = ".lock"  # a download's lock: ``.{chunk}.lock``
STAGING_SUFFIX = ".partial"  # a download's staging folder: ``.{chunk}.partial``
LEDGER = ".cache-bytes"  # the folder's byte count (see ``_chunk_cache``)
TAKEN_INFIX = ".taken-"  # a taken-over download's lock: ``.{chunk}.taken-{inode}.lock``
HOST = socket.gethostname()

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
    "TAKEN_INFIX",
    "make_cache_folder",
    "check_own_folders",
    "clear_stale_staging",
    "delete_if_unused",
    "flock",
    "lock_exclusive",
    "open_own",
    "open_pinned",
    "owner_held",
    "release_lock_file",
    "reservation",
    "reserve",
    "same_file",
    "staging_path",
    "taken_path",
]


def flock(fd: int, operation: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, operation)


SH = fcntl.LOCK_SH if fcntl is not None else 0
EX = fcntl.LOCK_EX if fcntl is not None else 0
NB = fcntl.LOCK_NB if fcntl is not None else 0


# Never follow a link at the last part; never block opening a FIFO (it is refused once open).
# O_NONBLOCK changes nothing for a regular file (reads, flock and mmap behave the same).
_OWN_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def _planted(path: Path, what: str) -> OSError:
    return OSError(
        errno.ELOOP,
        f"{path} is {what}, not one litdata made: refusing to write, read or delete through it (in a folder "
        "shared with other users or jobs, someone may have planted it); remove it, or use a folder only you can "
        "write to",
    )


def _link_or_kind(path: Path) -> str:
    try:
        return f"a symbolic link to {os.readlink(path)}"
    except OSError:
        return "not a regular file"


def open_own(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags, mode)`` of the cache's own file; ``ELOOP`` naming a link, FIFO, device or folder."""
    try:
        fd = os.open(path, flags | _OWN_FLAGS, mode)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EMLINK, errno.EISDIR, errno.ENXIO):
            raise _planted(path, _link_or_kind(path)) from None
        raise
    try:
        kind = os.fstat(fd).st_mode
        if not stat_mode.S_ISREG(kind):
            raise _planted(path, "not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_own_folders(root: Path, folder: Path) -> None:
    """An OSError naming the part unless ``folder`` and every folder up to ``root`` (which may be a link) is real."""
    parts = folder.relative_to(root).parts
    current = root
    for part in parts:
        current = current / part
        kind = os.lstat(current).st_mode
        if not stat_mode.S_ISDIR(kind):
            raise _planted(current, _link_or_kind(current) if stat_mode.S_ISLNK(kind) else "not a folder")


def make_cache_folder(folder: Path) -> None:
    """Make the cache folder ``folder`` (and its parents), refusing it if someone else could redirect or swap it.

    Every part of its path, from ``/`` down, is checked before and after the mkdir: a symbolic link
    must be this user's (or root's), and a folder must not be writable by everyone without the
    sticky bit, where anyone could swap the folders the cache checked for links (a
    ``PermissionError`` naming the part).
    """
    _check_cache_path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _check_cache_path(folder)  # what was made meanwhile (by another user, racing the mkdir) too


def _check_cache_path(folder: Path) -> None:
    if not hasattr(os, "geteuid"):  # pragma: no cover - Windows: no owners to compare
        return
    trusted = {os.geteuid(), 0}
    pending = list(folder.parts)
    current = Path(pending.pop(0))
    hops = 0
    while pending:
        current = current / pending.pop(0)
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return  # not made yet
        if stat_mode.S_ISLNK(info.st_mode):
            target = os.readlink(current)
            if info.st_uid not in trusted:
                raise PermissionError(
                    errno.EPERM,
                    f"cache folder {folder}: {current} is a symbolic link to {target} made by another user "
                    f"(uid {info.st_uid}): refusing to cache through it (in a folder shared with other users, "
                    "someone may have planted it); remove it, or choose a cache folder you made (cache_dir or "
                    "LITDATA_CACHE_DIR)",
                )
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, f"cache folder {folder}: too many symbolic links at {current}")
            # the link's target replaces it: check the target's own path from its start
            pending = [*Path(target).parts, *pending]
            current = current.parent
            if Path(target).is_absolute():
                current = Path(pending.pop(0))
            continue
        if (
            stat_mode.S_ISDIR(info.st_mode)
            and info.st_mode & stat_mode.S_IWOTH
            and not info.st_mode & stat_mode.S_ISVTX
        ):
            raise PermissionError(
                errno.EPERM,
                f"cache folder {folder}: {current} is writable by every user and has no sticky bit "
                f"(mode {stat_mode.S_IMODE(info.st_mode):o}): anyone could replace the folders the cache "
                "writes into; chmod o-w (or +t) it, or choose another cache folder (cache_dir or LITDATA_CACHE_DIR)",
            )


def same_file(fd: int, path: Path) -> os.stat_result | None:
    """The path's stat if ``path`` still names the file open as ``fd`` (itself, not through a link), else None."""
    try:
        on_disk = os.lstat(path)
    except FileNotFoundError:
        return None
    mine = os.fstat(fd)
    return on_disk if (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino) else None


def open_pinned(path: Path) -> int | None:
    """Open ``path`` holding a shared lock on it, or None if it is not (or no longer) there."""
    try:
        fd = open_own(path, os.O_RDONLY)
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
                os.utime(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def delete_if_unused(path: Path) -> bool:
    """Delete ``path`` unless some process holds a lock on it; True if it was deleted."""
    try:
        fd = open_own(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        flock(fd, EX | NB)
        if same_file(fd, path) is None:
            return False
        path.unlink()
        return True
    except (BlockingIOError, FileNotFoundError):  # in use, or deleted meanwhile
        return False
    finally:
        os.close(fd)


def _open_lock_file(path: Path) -> int:
    while True:
        try:
            return open_own(path, os.O_RDWR | os.O_CREAT)
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


def release_lock_file(fd: int, path: Path) -> None:
    """Delete the lock file we hold (under its taken-over name too), then release it."""
    try:
        for name in (path, taken_path(path, os.fstat(fd).st_ino)):
            with contextlib.suppress(FileNotFoundError):
                if same_file(fd, name) is not None:
                    name.unlink()
    finally:
        os.close(fd)


def taken_path(lock_path: Path, inode: int) -> Path:
    """The second name a taken-over download's lock file ``lock_path`` (of ``inode``) gets."""
    return lock_path.with_name(f"{lock_path.name.removesuffix(LOCK_SUFFIX)}{TAKEN_INFIX}{inode}{LOCK_SUFFIX}")


def staging_path(final: Path, inode: int) -> Path:
    """The staging folder of the download of ``final`` that holds the lock file of ``inode``."""
    return final.with_name(f".{final.name}.{inode}{STAGING_SUFFIX}")


def owner_held(final: Path, inode: int) -> bool:
    """Whether some process holds a lock file of ``final``'s chunk whose inode is ``inode`` (it may resume)."""
    lock_path = final.with_name(f".{final.name}{LOCK_SUFFIX}")
    for name in (lock_path, taken_path(lock_path, inode)):
        try:
            fd = open_own(name, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            continue
        try:
            if os.fstat(fd).st_ino == inode:
                flock(fd, SH | NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


def clear_stale_staging(final: Path, own_inode: int) -> None:
    """Remove the staging folders (and taken-over lock files) of ``final``'s chunk nobody uses.

    Called by the download holding the chunk's lock (of ``own_inode``, whose number a leftover may
    reuse); a staging folder named after a lock file still held belongs to a download that may resume.
    """
    prefix = f".{final.name}."
    lock_path = final.with_name(f".{final.name}{LOCK_SUFFIX}")
    taken_prefix = f"{lock_path.name.removesuffix(LOCK_SUFFIX)}{TAKEN_INFIX}"
    try:
        entries = list(os.scandir(final.parent))
    except FileNotFoundError:
        return
    for entry in entries:
        name = entry.name
        if name.startswith(taken_prefix) and name.endswith(LOCK_SUFFIX):
            delete_if_unused(Path(entry.path))  # its holder died
        elif name.startswith(f"{lock_path.name}.") and name.endswith(".new"):
            delete_if_unused(Path(entry.path))  # a takeover that crashed before it took its place
        elif name == f"{prefix[:-1]}{STAGING_SUFFIX}":  # an older release's staging name
            shutil.rmtree(entry.path, ignore_errors=True)
        elif name.startswith(prefix) and name.endswith(STAGING_SUFFIX):
            inode = name[len(prefix) : -len(STAGING_SUFFIX)]
            if inode.isdigit() and (int(inode) == own_inode or not owner_held(final, int(inode))):
                shutil.rmtree(entry.path, ignore_errors=True)


def reserve(fd: int, nbytes: int) -> None:
    """Record in the lock file we hold that our download will add ``nbytes``, and our pid and host."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d %d %s" % (max(nbytes, 0), os.getpid(), HOST.encode("utf-8", "replace")), 0)


def reservation(path: Path) -> int:
    """The bytes a download holding the lock file ``path`` will add; 0 if nobody holds it."""
    try:
        fd = open_own(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    try:
        flock(fd, SH | NB)
        return 0
    except BlockingIOError:  # a download holds it
        text = os.pread(fd, 32, 0).split(b" ", 1)[0]
        return int(text) if text.isdigit() else 0
    finally:
        os.close(fd)
