"""Read-ahead of the next chunks of a dataset read in place, capped by the memory it may take.

A dataset mapped where it lies waits for the disk at the first touch of each chunk, so the next
chunks in this reader's order are asked into the page cache (``posix_fadvise(POSIX_FADV_WILLNEED)``).
All readers of the node together (DataLoader workers times ranks) may ask for at most half of
``MemAvailable``; when even one chunk per reader does not fit, the ``StreamingDataLoader`` starts
fewer workers (:func:`worker_cap`). Either cap is logged once. ``LITDATA_POSIX_FAST=0`` turns it off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from litdata_format.internal import format_size, read_text
from litdata_stream._env import logger
from litdata_stream._sources.posix import posix_fast_setting

__all__ = ["ReadAhead", "available_memory", "capped_workers", "readahead_depth", "worker_cap"]

MEMORY_FRACTION = 0.5
_noticed = False


def _meminfo_file() -> str:
    # LITDATA_MEMINFO: another meminfo-format file (a container's cgroup view, or a test's).
    return read_text("LITDATA_MEMINFO") or "/proc/meminfo"


def available_memory(meminfo: str | os.PathLike[str] | None = None) -> int | None:
    """The bytes of memory available to new work, from a ``/proc/meminfo``-format file (None: unknown).

    ``MemAvailable`` when the kernel gives it, else ``MemFree + Cached`` (both leave out hugetlb pages).
    ``meminfo`` defaults to ``$LITDATA_MEMINFO`` or ``/proc/meminfo``.
    """
    try:
        text = Path(meminfo or _meminfo_file()).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
            fields[name.strip()] = int(parts[0]) * scale
    if "MemAvailable" in fields:
        return fields["MemAvailable"]
    if "MemFree" in fields:
        return fields["MemFree"] + fields.get("Cached", 0)
    return None


def readers_on_node(workers: int) -> int:
    """How many processes of this node read the dataset: DataLoader workers times ranks on the node."""
    try:
        ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        ranks = 1
    return max(1, workers) * ranks


def _fitting(unit_bytes: int, meminfo: str | os.PathLike[str] | None) -> tuple[int, int]:
    """How many times ``unit_bytes`` fit in half of ``MemAvailable``, and ``MemAvailable`` (unknown: no limit)."""
    available = available_memory(meminfo)
    if available is None:
        return sys.maxsize, 0
    return int(available * MEMORY_FRACTION) // max(1, unit_bytes), available


def readahead_depth(
    wanted: int, chunk_bytes: int, readers: int, meminfo: str | os.PathLike[str] | None = None
) -> tuple[int, str | None]:
    """``(depth, notice)``: chunks (``0 .. wanted``) each of the node's ``readers`` may ask ahead, and the notice.

    ``chunk_bytes`` is the dataset's largest chunk; ``notice`` is None unless the memory cap shortened it.
    """
    if wanted <= 0 or posix_fast_setting() is False:
        return 0, None
    fits, available = _fitting(chunk_bytes * readers, meminfo)
    if fits >= wanted:
        return wanted, None
    depth = max(0, fits)
    notice = (
        f"litdata read-ahead capped at {depth} chunk(s) per reader (asked {wanted}): {readers} readers x "
        f"{format_size(chunk_bytes)} chunks must stay under half of MemAvailable ({format_size(available)})"
    )
    return depth, notice


def worker_cap(workers: int, chunk_bytes: int, meminfo: str | os.PathLike[str] | None = None) -> tuple[int, str | None]:
    """``(workers, notice)``: how many of ``workers`` (per rank) may read in place, and the notice if capped.

    Each worker maps at least ``chunk_bytes`` (the largest chunk read in place; 0: no cap), so the node's
    readers times that must stay under half of ``MemAvailable``. At least 1 when ``workers`` was.
    """
    if workers <= 1 or chunk_bytes <= 0 or posix_fast_setting() is False:
        return workers, None
    ranks = readers_on_node(1)
    fits, available = _fitting(chunk_bytes * ranks, meminfo)
    if fits >= workers:
        return workers, None
    capped = max(1, fits)
    notice = (
        f"litdata starts {capped} DataLoader worker(s) per rank instead of num_workers={workers}: {ranks} rank(s) x "
        f"{workers} workers x {format_size(chunk_bytes)} chunks read in place would not stay under half of "
        f"MemAvailable ({format_size(available)}); free memory or write smaller chunks to use them all"
    )
    return capped, notice


def capped_workers(workers: int, chunk_bytes: int) -> int:
    """:func:`worker_cap` of this node's memory, its notice logged."""
    capped, notice = worker_cap(workers, chunk_bytes)
    if notice is not None:
        logger.warning(notice)
    return capped


class ReadAhead:
    """Asks the page cache for the ``depth`` chunks that follow the one being read, in the reader's order."""

    def __init__(self, directory: Path, filename: Callable[[int], str], depth: int) -> None:
        self.directory = directory
        self.filename = filename
        self.depth = depth
        self._order: list[int] = []
        self._position: dict[int, int] = {}
        self._asked: set[int] = set()

    @classmethod
    def for_reader(cls, directory: Path, filename: Callable[[int], str], largest: int, wanted: int) -> ReadAhead:
        """The read-ahead of this process: its depth capped by memory, the cap noticed once (by worker 0)."""
        global _noticed
        from litdata_stream._env import WorkerEnv

        worker = WorkerEnv.detect()
        depth, notice = readahead_depth(wanted, max(largest, 1), readers_on_node(worker.world_size))
        if notice is not None and worker.rank == 0 and not _noticed:
            _noticed = True
            logger.warning(notice)
        return cls(directory, filename, depth)

    def schedule(self, order: list[int]) -> None:
        """The chunks in the order this reader will read them."""
        if self.depth <= 0:
            return  # nothing is asked ahead: no position per chunk to keep (a worker's share of 1M chunks)
        self._order = list(order)
        self._position = {}
        for place, number in enumerate(self._order):
            self._position.setdefault(number, place)
        self._asked.clear()

    def reached(self, number: int) -> None:
        """The reader opened chunk ``number``: ask for the ``depth`` chunks after it."""
        place = self._position.get(number)
        if self.depth <= 0 or place is None:
            return
        for following in self._order[place + 1 : place + 1 + self.depth]:
            if following not in self._asked:
                self._asked.add(following)
                self.advise(following)

    def advise(self, number: int) -> None:
        """Start reading chunk ``number``'s file into the page cache (returns at once)."""
        if not hasattr(os, "posix_fadvise"):
            return  # macOS, Windows: no such hint
        try:
            descriptor = os.open(self.directory / self.filename(number), os.O_RDONLY)
        except OSError:
            return  # a missing chunk is reported when it is opened
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass  # a hint: a filesystem that refuses it is read as before
        finally:
            os.close(descriptor)
