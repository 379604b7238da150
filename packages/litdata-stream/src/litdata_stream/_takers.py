"""Takers: the samples of one stretch of a dataset, ``count`` at a time, as parts of a batch.

Read one by one (:class:`SampleTaker`) or gathered as arrays, one part per run of samples from the
same chunk (:class:`GatheringTaker`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, Protocol

import numpy as np

from litdata_format import BaseItemLoader
from litdata_format.internal import Chunk, SampleMap, SmallChunkRows
from litdata_io.internal import Token, activity_begin, activity_end, probe
from litdata_stream._pass_plan import EpochOrder, Interval
from litdata_stream._sources.source import ChunkSource, LocalSource

# A chunk read by rows (small local chunks) is opened only if it must be; past this many items its
# order is made only once it is open, its count checked against its header.
_ORDER_UNOPENED = 1 << 16

__all__ = ["GatheringTaker", "SampleTaker", "Taker", "reading"]


class Taker(Protocol):
    """Reads one stretch of a dataset a batch's share at a time (see ``StreamingReader.stretch_taker``)."""

    def take(self, count: int) -> tuple[list[Any], int]:
        """The next ``count`` samples (fewer at the end) as parts of a batch, and how many there are."""
        ...


class SampleTaker:
    """Samples read one by one; a batch's share is one part: the list of them."""

    def __init__(self, samples: Iterator[Any]) -> None:
        self._samples = samples

    def take(self, count: int) -> tuple[list[Any], int]:
        """The next ``count`` samples (fewer at the end) as one part, and how many there are."""
        samples = list(itertools.islice(self._samples, count))
        return ([samples] if samples else []), len(samples)


class GatheringTaker:
    """Samples gathered as arrays: one part per run of samples from the same chunk.

    A chunk is released as soon as its last sample is taken (parts are copies). Small chunks read in
    place (``LocalSource.small_rows``) are not opened where the format can read their rows straight
    from the files: the rows are joined into one part per batch (``SmallChunkRows``). ``loader`` is
    the item loader ``gather`` reads with (None: every chunk is opened).
    """

    def __init__(self, source: ChunkSource, order: EpochOrder, intervals: Sequence[Interval],
                 kept: SampleMap, gather: Callable[[Chunk, np.ndarray], Any],
                 loader: BaseItemLoader | None = None) -> None:  # fmt: skip
        self._order = order
        self._kept = kept
        self._gather = gather
        self._rows = source.small_rows(loader) if loader is not None and isinstance(source, LocalSource) else None
        pieces = order.pieces(intervals)
        self._source = source
        self._source.schedule([p.chunk for p in pieces])
        self._pieces = iter(pieces)
        self._chunk = -1
        self._opened: Any = None  # the chunk being read, once opened (with ``rows``, only when it must be)
        self._items: np.ndarray = np.empty(0, dtype=np.int64)
        self._taken = 0
        self._reading: Token | None = None  # the probe's token of the chunk being read

    def take(self, count: int) -> tuple[list[Any], int]:
        if self._rows is not None:
            return self._take_rows(self._rows, count)
        parts: list[Any] = []
        got = 0
        while got < count:
            if self._taken == len(self._items) and not self._next_piece():
                break
            step = min(count - got, len(self._items) - self._taken)
            if step:
                # Traced at the grain it is read: one run of samples of one chunk (never one by one).
                with probe.span("sample", "sample", None, chunk=self._chunk, samples=step):
                    parts.append(self._gather(self._opened, self._items[self._taken : self._taken + step]))
                self._taken += step
                got += step
            if self._taken == len(self._items):  # this chunk is done (an empty piece at once)
                probe.end(self._reading)
                self._source.release(self._chunk)
        return parts, got

    def _take_rows(self, rows: SmallChunkRows, count: int) -> tuple[list[Any], int]:
        """:meth:`take` where small chunks' rows are read straight from their files (a chunk opened only if it must be).

        The hang watchdog is told once per batch, not per chunk: publishing costs as much as reading a small chunk.
        """
        parts: list[Any] = []
        got = 0
        board = activity_begin(f"read a batch of {count} samples from small chunk files in {rows.folder}")
        try:
            while got < count:
                if self._taken == len(self._items) and not self._next_piece(board=False):
                    break
                step = min(count - got, len(self._items) - self._taken)
                if step:
                    chosen = self._items[self._taken : self._taken + step]
                    with probe.span("sample", "sample", None, chunk=self._chunk, samples=step):
                        if self._opened is not None or not rows.read(self._chunk, chosen.tolist()):
                            if rows.pending:  # the rows read so far come first
                                self._flush(rows, parts)
                            parts.append(self._gather(self._open(), chosen))
                    self._taken += step
                    got += step
                if self._taken == len(self._items):
                    probe.end(self._reading)
                    if self._opened is not None:
                        self._opened = None
                        self._source.release(self._chunk)
            if rows.pending:
                self._flush(rows, parts)
        finally:
            activity_end(board)
        return parts, got

    def _open(self) -> Any:
        if self._opened is None:
            self._opened = self._source.chunk(self._chunk)
        return self._opened

    def _flush(self, rows: SmallChunkRows, parts: list[Any]) -> None:
        """The rows read since the last flush, as one part; else their pieces gathered the usual way."""
        part, pieces = rows.flush()
        if part is not None:
            parts.append(part)
            return
        # Some row breaks its layout: each chunk is gathered (or decoded) on its own, as without ``rows``.
        source = self._source
        for number, items in pieces:
            opened = source.chunk(number)
            try:
                parts.append(self._gather(opened, np.asarray(items, dtype=np.int64)))
            finally:
                source.release(number)  # a chunk read by ``rows`` is not the one open (``_opened``)

    def _next_piece(self, board: bool = True) -> bool:
        piece = next(self._pieces, None)
        if piece is None:
            return False
        source, chunk = self._source, piece.chunk
        self._chunk, self._taken = chunk, 0
        if self._rows is None or int(self._order.chunk_lengths[chunk]) > _ORDER_UNOPENED:
            # Opened first: its item count is checked against its header before its order is made
            # (an index claiming 10**9 items in a small chunk would allocate gigabytes).
            self._opened = source.chunk(chunk)
        within = self._order.within(chunk)[piece.lo : piece.hi]
        kept = self._kept.items(chunk)
        self._items = within if kept is None else kept[within]
        doing = partial(reading, source, chunk) if board else None
        self._reading = probe.begin("read", "read", doing, chunk=chunk, samples=len(self._items))
        return True


def reading(source: ChunkSource, chunk: int) -> str:
    """What a worker reading ``chunk`` publishes for the hang watchdog (opening it waits for it)."""
    return f"read chunk {chunk} ({source.index.table.filename(chunk)}: wait, open, decode, transform)"
