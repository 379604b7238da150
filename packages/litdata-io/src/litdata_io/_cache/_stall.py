"""Waiting for another process's download of a chunk, and taking over one that stopped.

A download holds ``LOCK_EX`` on ``.{chunk}.lock`` (``_locks``); the kernel releases that lock
when its holder dies, not when it is stopped (SIGSTOP, a debugger, a frozen NFS client). So a
waiter watches the download's progress (its staging folder's files, the lock file, the holder's
``/proc/<pid>/io``). When nothing changed for :func:`download_stall_seconds`, it takes the download
over: under the ledger's lock (so two waiters never both do) it gives the stopped holder's lock
file a second name, ``.{chunk}.taken-{inode}.lock``, and atomically replaces ``.{chunk}.lock`` with
a fresh lock file it holds, then downloads into its own staging folder.

The stopped holder is left consistent: its lock file keeps a name, so its reservation still
counts towards the cap; a chunk is published with a hard link that never replaces a file, so
whichever download finishes first publishes and the other uses that copy, each taking back only
its own reservation.

While it waits, the waiter says on whom (the DataLoader watchdog shows it), and after
``LITDATA_DOWNLOAD_STALL_WARN_S`` without progress it logs a WARNING naming the chunk, the holder
and when it takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from litdata_format.internal import read_seconds
from litdata_io._cache._locks import (
    EX,
    HOST,
    NB,
    flock,
    lock_exclusive,
    open_own,
    same_file,
    staging_path,
    taken_path,
)
from litdata_io._instrument._probe import probe

__all__ = [
    "ENV_STALL",
    "ENV_STALL_WARN",
    "DownloadStalledError",
    "Superseded",
    "download_stall_seconds",
    "download_stall_warn_seconds",
    "holder_state",
    "lock_download",
    "publish_once",
]

ENV_STALL = "LITDATA_DOWNLOAD_STALL_S"
ENV_STALL_WARN = "LITDATA_DOWNLOAD_STALL_WARN_S"
DEFAULT_STALL_S = 30.0
DEFAULT_STALL_WARN_S = 10.0
_log = logging.getLogger("litdata_io")
_STATES = {
    "T": "stopped",
    "t": "stopped by a debugger",
    "D": "in uninterruptible I/O",
    "Z": "exited",
    "R": "running",
    "S": "running",
}


class DownloadStalledError(OSError):
    """A download of a chunk by another process made no progress and could not be taken over."""


class Superseded(Exception):
    """Another process published the chunk this download was fetching (it took the download over)."""


def publish_once(ready: Path, final: Path) -> None:
    """Give ``ready`` the name ``final`` unless a file is there already (:class:`Superseded` then).

    That file is the copy of a process that took this download over: as good, and replacing it would count it twice.
    """
    try:
        os.link(ready, final)
    except FileExistsError:
        raise Superseded(f"{final} was published by the process that took its download over") from None
    except OSError:  # no hard links on this filesystem: a takeover cannot happen on it either
        os.replace(ready, final)
        return
    ready.unlink()


def download_stall_seconds() -> float:
    """How long a download may make no progress before a waiting process takes it over.

    ``LITDATA_DOWNLOAD_STALL_S`` if set, else 30 s; 0 waits for the holder however long it takes.
    """
    value = read_seconds(ENV_STALL)
    return DEFAULT_STALL_S if value is None else value


def download_stall_warn_seconds() -> float:
    """How long a download may make no progress before a waiting process warns (0: never).

    ``LITDATA_DOWNLOAD_STALL_WARN_S`` if set, else 10 s.
    """
    value = read_seconds(ENV_STALL_WARN)
    return DEFAULT_STALL_WARN_S if value is None else value


def _lock_holder(lock_fd: int) -> tuple[int, str] | None:
    """The pid and host recorded in the lock file open as ``lock_fd``, if any."""
    fields = os.pread(lock_fd, 512, 0).decode("utf-8", "replace").split(" ", 2)
    return (int(fields[1]), fields[2].strip()) if len(fields) == 3 and fields[1].isdigit() else None


def describe_holder(lock_fd: int) -> str:
    """Who holds the lock file open as ``lock_fd``: ``pid 123 on host (stopped)`` as far as known."""
    holder = _lock_holder(lock_fd)
    if holder is None:
        return "another process (its pid is not recorded yet)"
    pid, host = holder
    if host != HOST:
        return f"pid {pid} on {host}"
    state = holder_state(pid)
    return f"pid {pid} ({'state unknown' if state == 'unknown' else state})"


def holder_state(pid: int) -> str:
    """What ``/proc`` says process ``pid`` of this host does.

    ``running``, ``stopped``, ``stopped by a debugger``, ``in uninterruptible I/O``, ``exited``
    (a zombie), ``gone`` (no such process), or ``unknown`` (no ``/proc``).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "gone" if os.path.isdir("/proc/self") else "unknown"
    except OSError:
        return "unknown"
    code = stat.rpartition(")")[2].strip()[:1]
    return _STATES.get(code, f"state {code}")


def _holder_pid(lock_fd: int) -> int | None:
    """The pid holding the lock file open as ``lock_fd`` if it runs on this host, else None."""
    holder = _lock_holder(lock_fd)
    return holder[0] if holder is not None and holder[1] == HOST else None


def _bytes_read(pid: int) -> bytes:
    """The holder's ``rchar`` (bytes it read, sockets included): it grows while a download receives."""
    try:
        with open(f"/proc/{pid}/io", "rb") as handle:
            return handle.readline()
    except OSError:
        return b""


# pid of a holder on this host: (its rchar, since when and until when this process saw it
# unchanged), shared by this process's waits, so a holder stopped with several chunks' locks is
# waited for once. A reading older than the bound is not trusted. No lock: a race only moves a
# clock a poll later.
_IDLE: dict[int, tuple[bytes, float, float]] = {}


def _idle_since(lock_fd: int, now: float, stall_s: float) -> float:
    """Since when this process has seen the holder of ``lock_fd`` read nothing; ``now`` if unknown.

    Only a holder on this host has a reading to compare (``/proc/<pid>/io``).
    """
    pid = _holder_pid(lock_fd)
    read = _bytes_read(pid) if pid is not None else b""
    if pid is None or not read:
        return now
    known = _IDLE.get(pid)
    if known is None or known[0] != read or now - known[2] > stall_s:
        _IDLE[pid] = (read, now, now)
        return now
    _IDLE[pid] = (read, known[1], now)
    return known[1]


def _progress(lock_fd: int, final: Path, inode: int) -> tuple[object, ...]:
    """What changes while the download holding ``lock_fd`` (of ``inode``) moves on.

    Its staging folder and, for a holder on this host, the bytes it read (a stopped process reads nothing).
    """
    seen: list[object] = [os.pread(lock_fd, 512, 0)]
    pid = _holder_pid(lock_fd)
    if pid is not None:
        seen.append(_bytes_read(pid))
    try:
        entries = list(os.scandir(staging_path(final, inode)))
    except (FileNotFoundError, NotADirectoryError):
        return tuple(seen)
    for entry in entries:
        with contextlib.suppress(OSError):
            stat = entry.stat(follow_symlinks=False)
            seen.append((entry.name, stat.st_size, stat.st_blocks, stat.st_mtime_ns))
    return tuple(sorted(seen, key=repr))


async def lock_download(
    lock_path: Path, final: Path, label: str, serialize: Callable[[], AbstractContextManager[object]]
) -> int:
    """A descriptor holding the download lock ``lock_path`` of chunk ``final``, taking over a stalled holder.

    ``label`` (the chunk's URL) is for messages; ``serialize`` is the lock every process of the cache
    folder takes around a takeover. :class:`DownloadStalledError` if this filesystem cannot take over.
    """
    while True:
        fd = lock_exclusive(lock_path, blocking=False)
        if fd is not None:
            return fd
        fd = await _wait(lock_path, final, label, serialize)
        if fd is not None:
            return fd


async def _wait(
    lock_path: Path, final: Path, label: str, serialize: Callable[[], AbstractContextManager[object]]
) -> int | None:
    """Wait on the current lock file; its descriptor once held, or None to look again."""
    stall_s, warn_s = download_stall_seconds(), download_stall_warn_seconds()
    try:
        fd = os.open(lock_path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None  # released and deleted meanwhile
    waiter = _LockWaiter(fd)
    inode = os.fstat(fd).st_ino
    poll = min(max(min(stall_s or math.inf, warn_s or math.inf) / 8, 0.05), 1.0)
    warned = False
    now = time.monotonic()
    last, since = _progress(fd, final, inode), _idle_since(fd, now, stall_s)
    holder = describe_holder(fd)
    token = probe.begin("lock_wait", "lock", _doing(label, holder, lock_path, stall_s), lock=lock_path.name)
    owned = False
    try:
        while True:
            if await waiter.wait(poll):
                owned = True
                if same_file(fd, lock_path) is None:
                    os.close(fd)  # the holder deleted it while we waited: lock the current one
                    return None
                return fd
            if same_file(fd, lock_path) is None:  # released, or taken over by another waiter
                waiter.abandon()
                return None
            now, seen = time.monotonic(), _progress(fd, final, inode)
            idle = _idle_since(fd, now, stall_s)
            if describe_holder(fd) != holder:
                holder = describe_holder(fd)
                probe.end(token)  # a new holder: a new line on the board (and a new span)
                token = probe.begin("lock_wait", "lock", _doing(label, holder, lock_path, stall_s), lock=lock_path.name)
            if seen != last:
                last, since = seen, now
            else:
                since = min(since, idle)  # this process saw the holder stalled before this wait
            if seen == last and warn_s and now - since >= warn_s and not warned:
                warned = True
                _log.warning(
                    "chunk %s: its download by %s has made no progress for %.0f s (lock %s); %s",
                    label,
                    holder,
                    now - since,
                    lock_path,
                    f"this process takes it over after {stall_s:g} s without progress (set {ENV_STALL} to change that)"
                    if stall_s
                    else f"this process waits for it ({ENV_STALL}=0)",
                )
            if seen == last and stall_s and now - since >= stall_s:
                taken = _take_over(lock_path, fd, final, inode, label, holder, stall_s, serialize)
                waiter.abandon()
                return taken
    except BaseException:
        if not owned:
            waiter.abandon()
        raise
    finally:
        probe.end(token)


def _doing(label: str, holder: str, lock_path: Path, stall_s: float) -> str:
    after = f"taken over after {stall_s:g} s without progress" if stall_s else f"{ENV_STALL}=0: no takeover"
    return f"waiting for {holder} to download chunk {label} (lock {lock_path}; {after})"


def _take_over(
    lock_path: Path,
    watched: int,
    final: Path,
    inode: int,
    label: str,
    holder: str,
    stall_s: float,
    serialize: Callable[[], AbstractContextManager[object]],
) -> int | None:
    """Replace the stalled lock file ``inode`` with one we hold; None if it changed meanwhile."""
    with serialize():
        if same_file(watched, lock_path) is None:
            return None  # released, or another waiter took it over first
        lock_fd = os.open(lock_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            flock(lock_fd, EX | NB)
            return None  # its holder died (or just released): the usual way is quicker
        except BlockingIOError:
            pass
        finally:
            os.close(lock_fd)
        second = taken_path(lock_path, inode)
        fresh = lock_path.with_name(f"{lock_path.name}.{os.getpid()}.new")
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()  # a crashed takeover's (or something planted there): made anew, never opened
        fd = open_own(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        try:
            flock(fd, EX)
            os.pwrite(fd, b"0 %d %s" % (os.getpid(), HOST.encode("utf-8", "replace")), 0)
            with contextlib.suppress(FileNotFoundError):
                if same_file(watched, second) is None:
                    second.unlink()  # a leftover of a crashed takeover of an earlier lock file
            try:
                if same_file(watched, second) is None:
                    os.link(lock_path, second)
            except OSError as err:
                raise DownloadStalledError(
                    f"chunk {label}: its download by {holder} made no progress for {stall_s:g} s (lock "
                    f"{lock_path}), and this filesystem cannot take it over ({err}); resume or end that "
                    f"process, or set {ENV_STALL}=0 to wait for it"
                ) from err
            if same_file(watched, second) is None:  # the lock file changed between the check and the link
                with contextlib.suppress(FileNotFoundError):
                    second.unlink()
                return None
            os.replace(fresh, lock_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                fresh.unlink()
            os.close(fd)
            raise
        if same_file(fd, lock_path) is None:
            os.close(fd)
            return None
    probe.instant("takeover", "lock", chunk=final.name, holder=holder)
    return fd


class _LockWaiter:
    """``LOCK_EX`` on ``fd`` awaited in a daemon thread, so the kernel wakes us as soon as it is free.

    A daemon thread (not the loop's executor) so a stuck holder never blocks interpreter exit.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._handoff = threading.Lock()
        self._abandoned = False
        self._delivered = False
        threading.Thread(target=self._run, name="litdata-chunk-lock", daemon=True).start()

    def _run(self) -> None:
        error: BaseException | None = None
        try:
            flock(self.fd, EX)
        except BaseException as err:
            error = err
        with self._handoff:
            if self._abandoned:
                os.close(self.fd)
                return
            self._delivered = True
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(_settle, self._done, error)

    async def wait(self, timeout: float) -> bool:
        """Whether the lock is ours, after at most ``timeout`` seconds; abandons it if cancelled."""
        try:
            await asyncio.wait_for(asyncio.shield(self._done), timeout)
        except TimeoutError:
            return False
        except BaseException:
            self.abandon()
            raise
        return True

    def abandon(self) -> None:
        """Give up the wait; the descriptor is closed (now if the lock came, else when it comes)."""
        with self._handoff:
            if self._abandoned:
                return
            self._abandoned = True
            delivered = self._delivered
        if delivered:
            os.close(self.fd)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
