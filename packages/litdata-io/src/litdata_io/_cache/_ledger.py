"""The cache folder's byte ledger (``.cache-bytes``), and taking it from a holder that stopped.

``.cache-bytes`` holds ``<bytes> <unix time of the last count>`` (the first :data:`WIDTH` bytes),
then the disk cap (the bytes the disk had for the cache when it was last found full, blank when
never) and, from byte :data:`_HOLDER_AT`, ``<pid> <host>`` of the process holding it. Every process
changes it under an exclusive ``flock`` and reads it without a lock (:meth:`Ledger.read`).

A process stopped while holding it (SIGSTOP, a debugger) would stall every download of the folder.
So a process waits for it at most ``LITDATA_DOWNLOAD_STALL_S`` while its holder is not seen running,
then takes it over: it renames a fresh ledger file it holds, with the old total and a count time
of 0, over ``.cache-bytes``. Every process writes only into the file it locked after checking that
the name still names it, so the stopped holder's later writes go to the replaced file and are
lost; the count time of 0 makes the next check of the cap count the folder again before anything
trusts the ledger, so a lost change never makes it count too little.

Fork. A forked child closes its copies of descriptors holding the ledger, so the lock goes when the
parent lets go.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import NamedTuple

from litdata_io._cache._locks import EX, HOST, NB, flock, open_own, same_file
from litdata_io._cache._stall import ENV_STALL, download_stall_seconds, holder_state
from litdata_io._instrument._probe import probe
from litdata_io._processes import _process

__all__ = ["STATE_WIDTH", "WIDTH", "Ledger", "LedgerState", "parse_ledger", "write_disk_cap", "write_ledger"]

WIDTH = 48  # "<bytes> <time>", space-padded: what every release reads and writes
_HOLDER_AT = 64  # "<pid> <host>" of the holder: past what older releases read (as is the disk cap before it)
STATE_WIDTH = _HOLDER_AT  # the bytes parse_ledger reads
_HOLDER_WIDTH = 192
_FREE = b" " * _HOLDER_WIDTH
_NOT_RUNNING = ("stopped", "stopped by a debugger", "exited", "gone", "unknown", "elsewhere")

_held: set[int] = set()  # descriptors of this process holding (or about to hold) a ledger
_held_lock = threading.Lock()


def _forget_in_child() -> None:
    # The lock is rebuilt too: a thread may have held it at the fork.
    global _held_lock
    for fd in list(_held):
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()
    _held_lock = threading.Lock()


_process.on_fork_in_child(_forget_in_child)


class LedgerState(NamedTuple):
    """What a ledger says: the folder's bytes, when they were last counted, and the disk cap (None: never full)."""

    total: int
    counted: float
    disk_cap: int | None


def parse_ledger(data: bytes) -> LedgerState | None:
    """What a ledger's first :data:`_HOLDER_AT` bytes say, or None if its total is unreadable."""
    try:
        total, counted = data[:WIDTH].split()
        state = LedgerState(int(total), float(counted), None)
    except ValueError:
        return None
    cap = data[WIDTH:_HOLDER_AT].strip(b"\0 ")
    return state._replace(disk_cap=int(cap)) if cap.isdigit() else state


def write_ledger(fd: int, total: int, counted: float) -> None:
    """Write ``total`` bytes counted at ``counted`` (unix time; 0: count again before trusting it)."""
    os.pwrite(fd, f"{total} {counted:.3f}".ljust(WIDTH).encode(), 0)


def write_disk_cap(fd: int, cap: int) -> None:
    """Record ``cap`` as the bytes the disk has for the cache (past what older releases read)."""
    os.pwrite(fd, str(cap).ljust(_HOLDER_AT - WIDTH).encode(), WIDTH)


class Ledger:
    """The cache folder's running total (published chunks and downloads in progress), shared by its processes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> LedgerState | None:
        """What the ledger says, or None if there is no ledger (or it is unreadable).

        Without a lock (a stopped holder cannot block it): a read that overlaps a write is read again.
        """
        try:
            fd = open_own(self.path, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            data = os.pread(fd, _HOLDER_AT, 0)
            for _ in range(3):
                again = os.pread(fd, _HOLDER_AT, 0)
                if again == data:
                    break
                data = again
            return parse_ledger(data)
        finally:
            os.close(fd)

    def add(self, delta: int) -> None:
        """Add ``delta`` bytes; without a ledger, nothing (the next eviction counts the folder)."""
        if not delta:
            return
        fd = self._acquire(create=False)
        if fd is None:
            return
        try:
            known = parse_ledger(os.pread(fd, WIDTH, 0))
            if known is not None:
                write_ledger(fd, max(known.total + delta, 0), known.counted)
        finally:
            self._release(fd)

    @contextlib.contextmanager
    def locked(self) -> Generator[int, None, None]:
        """A descriptor holding the ledger (created if missing) exclusively until the block ends."""
        fd = self._acquire(create=True)
        assert fd is not None
        try:
            yield fd
        finally:
            self._release(fd)

    def _open(self, create: bool) -> int | None:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        while True:
            with _held_lock:  # registered before it can hold a lock: a fork never misses it
                try:
                    fd = open_own(self.path, flags)
                except FileNotFoundError:
                    if not create:
                        return None
                    fd = -1
                if fd >= 0:
                    _held.add(fd)
                    return fd
            self.path.parent.mkdir(parents=True, exist_ok=True)  # the folder was removed (cache clear)

    def _close(self, fd: int) -> None:
        with _held_lock:
            _held.discard(fd)
            os.close(fd)

    def _release(self, fd: int) -> None:
        with contextlib.suppress(OSError):
            os.pwrite(fd, _FREE, _HOLDER_AT)
        self._close(fd)

    def _try(self, create: bool) -> tuple[int | None, int | None]:
        """(a descriptor holding the ledger, None) or (None, a descriptor of the busy one); (None, None) if missing."""
        fd = self._open(create)
        if fd is None:
            return None, None
        try:
            flock(fd, EX | NB)
        except BlockingIOError:
            return None, fd
        except BaseException:
            self._close(fd)
            raise
        if same_file(fd, self.path) is None:  # deleted or replaced while we locked it: look again
            self._close(fd)
            return self._try(create)
        _say_holder(fd)
        return fd, None

    def _acquire(self, create: bool) -> int | None:
        fd, busy = self._try(create)
        if busy is None:
            return fd
        stall_s = download_stall_seconds()
        seen, started = "", time.monotonic()  # the holder, and since when it holds the ledger
        pause, token = 0.0005, None
        try:
            while True:
                holder, state = _holder(busy)
                now = time.monotonic()
                if holder != seen:  # a new holder: its own clock, its own line on the watchdog's board
                    seen, started = holder, now
                    probe.end(token)
                    after = f"taken over after {stall_s:g} s unless it runs" if stall_s else f"{ENV_STALL}=0"
                    doing = f"waiting for {holder} to release the cache ledger {self.path} ({after})"
                    token = probe.begin("ledger_wait", "lock", doing, lock=self.path.name)
                if stall_s and now - started >= stall_s and state in _NOT_RUNNING:
                    taken = self._take_over(busy, holder, state, stall_s)
                    if taken is not None:
                        return taken
                    seen = ""  # replaced meanwhile by another taker: wait on the new one
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
                self._close(busy)
                fd, busy = self._try(create)
                if busy is None:
                    return fd
        finally:
            if busy is not None:
                self._close(busy)
            probe.end(token)

    def _take_over(self, watched: int, holder: str, state: str, stall_s: float) -> int | None:
        """Replace the ledger ``watched`` (held by a process not running) with one we hold; None if it changed."""
        fresh = self.path.with_name(f"{self.path.name}.{os.getpid()}.new")
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()  # a crashed takeover's (or something planted there): made anew, never opened
        with _held_lock:
            fd = open_own(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL)
            _held.add(fd)
        try:
            flock(fd, EX)  # nobody else opens this name
            known = parse_ledger(os.pread(watched, _HOLDER_AT, 0))
            write_ledger(fd, known.total if known is not None else 0, 0.0)  # count again before trusting it
            if known is not None and known.disk_cap is not None:
                write_disk_cap(fd, known.disk_cap)
            _say_holder(fd)
            if same_file(watched, self.path) is None:
                fresh.unlink()
                self._close(fd)
                return None
            os.replace(fresh, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                fresh.unlink()
            self._close(fd)
            raise
        if same_file(fd, self.path) is None:  # another taker replaced it right after us
            self._close(fd)
            return None
        probe.instant("takeover", "lock", lock=self.path.name, holder=holder, state=state, after_s=stall_s)
        return fd


def _say_holder(fd: int) -> None:
    text = f"{os.getpid()} {HOST}".encode("utf-8", "replace")[:_HOLDER_WIDTH]
    os.pwrite(fd, text.ljust(_HOLDER_WIDTH), _HOLDER_AT)


def _holder(fd: int) -> tuple[str, str]:
    """Who holds the ledger open as ``fd`` (``pid 12 on host``) and whether it runs, as far as known."""
    fields = os.pread(fd, _HOLDER_WIDTH, _HOLDER_AT).decode("utf-8", "replace").split(" ", 1)
    if len(fields) < 2 or not fields[0].isdigit():
        return "a process that did not say its pid", "unknown"
    pid, host = int(fields[0]), fields[1].strip()
    if host != HOST:
        return f"pid {pid} on {host}", "elsewhere"
    return f"pid {pid}", holder_state(pid)
