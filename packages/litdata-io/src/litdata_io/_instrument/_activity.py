"""What each DataLoader worker is doing right now, readable by the process that started it.

A StreamingDataLoader with a hang watchdog creates an :class:`ActivityBoard`: a small file with
one fixed-size slot per worker. Each worker attaches to its slot (:func:`attach_activity`) and the
code that can block (a download, a lock wait, a chunk's read) marks what it does with
:func:`activity_begin`. The slot is memory-mapped, so publishing is a few stores into shared memory,
per chunk, never per sample. The main process reads the slots when the loader has waited too long
for a batch; a slot half rewritten is decoded leniently (it is only a diagnostic), so no lock is
taken across processes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass

from litdata_io._instrument._switches import SWITCHES
from litdata_io._owned import owned_file
from litdata_io._processes import _process

__all__ = ["Activity", "ActivityBoard", "activity", "activity_begin", "activity_end", "attach_activity"]

_SLOT = 2048  # bytes per worker: a length and the worker's pid, then "since\ttext" lines
_HEADER = struct.Struct("<Ii")


@dataclass(frozen=True)
class Activity:
    """One thing a worker is doing: ``text`` (``download s3://b/chunk-0-3.bin``) since ``since`` (``time.time()``)."""

    text: str
    since: float


class _Slot:
    """This process's slot: its open operations, rewritten into shared memory as they change."""

    def __init__(self, path: str, index: int) -> None:
        with open(path, "r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), 0)
        self._offset = index * _SLOT
        self._lock = threading.Lock()  # the loop thread and the reader thread both publish
        self._open: dict[int, tuple[float, str]] = {}
        self._next = 0
        self._pid = os.getpid()
        _HEADER.pack_into(self._map, self._offset, 0, self._pid)

    def begin(self, text: str) -> int:
        with self._lock:
            self._next += 1
            self._open[self._next] = (time.time(), text)
            self._publish()
            return self._next

    def end(self, token: int) -> None:
        with self._lock:
            if self._open.pop(token, None) is not None:
                self._publish()

    def _publish(self) -> None:
        lines = "\n".join(f"{since:.3f}\t{text}" for since, text in self._open.values())
        data = lines.encode("utf-8", "replace")[: _SLOT - _HEADER.size]
        start = self._offset + _HEADER.size
        self._map[start : start + len(data)] = data
        _HEADER.pack_into(self._map, self._offset, len(data), self._pid)


_slot: _Slot | None = None
_slot_generation = -1


def attach_activity(path: str | None, index: int = 0) -> None:
    """Publish this process's activity into slot ``index`` of the board at ``path`` (None: stop)."""
    global _slot, _slot_generation
    _slot = None if path is None else _Slot(path, index)
    _slot_generation = _process.fork_generation()
    SWITCHES.activity = _slot is not None
    SWITCHES.update()


def activity_begin(text: str) -> int:
    """Mark the start of ``text`` (``download s3://b/chunk-0-3.bin``); the token :func:`activity_end` takes (0: off)."""
    slot = _slot
    if slot is None or _slot_generation != _process.fork_generation():  # a forked child publishes only once it attaches
        return 0
    return slot.begin(text)


def activity_end(token: int) -> None:
    """Mark the end of what :func:`activity_begin` returned ``token`` for."""
    slot = _slot
    if token and slot is not None and _slot_generation == _process.fork_generation():
        slot.end(token)


@contextlib.contextmanager
def activity(text: str) -> Generator[None, None, None]:
    """Publish ``text`` as what this worker does for the block's duration."""
    token = activity_begin(text)
    try:
        yield
    finally:
        activity_end(token)


class ActivityBoard:
    """The file the workers of one loader publish into: ``slots`` fixed-size slots, zeroed.

    Created by the main process; each worker calls ``attach_activity(board.path, worker_id)``.
    The board's descriptor holds the file alive (``_owned``): the board of a process killed with
    SIGKILL is deleted by the next process that makes one.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        directory = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self._fd, self.path = owned_file("litdata-activity-", directory)
        try:
            os.ftruncate(self._fd, slots * _SLOT)
            self._map = mmap.mmap(self._fd, slots * _SLOT)
        except BaseException:
            self.close()
            raise

    def read(self) -> list[list[Activity]]:
        """What every slot holds now, oldest operation first."""
        board: list[list[Activity]] = []
        for index in range(self.slots):
            offset = index * _SLOT
            length, _ = _HEADER.unpack_from(self._map, offset)
            start = offset + _HEADER.size
            raw = bytes(self._map[start : start + min(length, _SLOT - _HEADER.size)])
            found: list[Activity] = []
            for line in raw.decode("utf-8", "replace").splitlines():
                since, _, text = line.partition("\t")
                with contextlib.suppress(ValueError):
                    found.append(Activity(text, float(since)))
            board.append(sorted(found, key=lambda item: item.since))
        return board

    def pids(self) -> list[int]:
        """The pid of the process attached to each slot (0: none attached yet)."""
        return [_HEADER.unpack_from(self._map, index * _SLOT)[1] for index in range(self.slots)]

    def close(self) -> None:
        """Remove the board's file; the workers' mappings stay valid until they exit."""
        with contextlib.suppress(OSError):
            os.remove(self.path)
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)  # after the removal: a sweep never sees the board unlocked
        with contextlib.suppress(AttributeError, BufferError, ValueError):
            self._map.close()
