"""Reading a stretch of a dataset a batch's share at a time, and sending a worker's batches.

A *taker* hands out the samples of one stretch (intervals of an epoch order) of one
``StreamingDataset``, ``count`` at a time, as parts of a batch: read one by one
(:class:`SampleTaker`), or gathered as arrays, one part per run of samples from the same chunk
(:class:`GatheringTaker`). The dataset batches its own stretches through them, and the mixing
datasets take every sub-dataset's share of a batch through them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, Protocol

import numpy as np

from litdata_format.internal import Chunk, SampleMap
from litdata_io.internal import Token, probe
from litdata_stream._plan import EpochOrder, Interval
from litdata_stream._source import ChunkSource

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

    A chunk is released as soon as its last sample is taken (parts are copies: nothing refers to it).

    Args:
        source: the dataset's chunk source in this process.
        order: the epoch order the stretch is in.
        intervals: the stretch.
        kept: the dataset's sample map (which items of each chunk it keeps).
        gather: items of one opened chunk, as arrays (or a list of samples).
    """

    def __init__(self, source: ChunkSource, order: EpochOrder, intervals: Sequence[Interval],
                 kept: SampleMap, gather: Callable[[Chunk, np.ndarray], Any]) -> None:  # fmt: skip
        self._order = order
        self._kept = kept
        self._gather = gather
        pieces = order.pieces(intervals)
        self._source = source
        self._source.schedule([p.chunk for p in pieces])
        self._pieces = iter(pieces)
        self._chunk = -1
        self._opened: Any = None
        self._items: np.ndarray = np.empty(0, dtype=np.int64)
        self._taken = 0
        self._reading: Token | None = None  # the probe's token of the chunk being read

    def take(self, count: int) -> tuple[list[Any], int]:
        """The next ``count`` samples (fewer at the end) as parts of a batch, and how many there are."""
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

    def _next_piece(self) -> bool:
        piece = next(self._pieces, None)
        if piece is None:
            return False
        within = self._order.within(piece.chunk)[piece.lo : piece.hi]
        kept = self._kept.items(piece.chunk)
        self._chunk, self._taken = piece.chunk, 0
        self._items = within if kept is None else kept[within]
        source, chunk = self._source, piece.chunk
        doing = partial(reading, source, chunk)
        self._reading = probe.begin("read", "read", doing, chunk=chunk, samples=len(self._items))
        self._opened = source.chunk(chunk)
        return True


def reading(source: ChunkSource, chunk: int) -> str:
    """What a worker reading ``chunk`` publishes for the hang watchdog (opening it waits for it)."""
    return f"read chunk {chunk} ({source.index.table.filename(chunk)}: wait, open, decode, transform)"
