"""The sample map: sample index -> (chunk, position), the one place a reader counts samples.

A dataset's samples are numbered through its chunks in index order. A reader may keep only
some items of a chunk (a subsample, a subset), in an order of its own: the map holds, per chunk,
the items kept (or "all of them, in order"), and the prefix sums of the samples each chunk gives,
as a few flat numpy arrays: cheap to pickle and shared by forked workers without a copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SampleMap"]


def _prefix(counts: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    return starts


class SampleMap:
    """Sample numbers of a dataset's chunks, after what a reader keeps of each.

    ``counts`` is how many items each chunk stores, in index order; ``kept`` holds per chunk the
    item numbers kept, in the order they are read (None for a chunk: all of its items, in order;
    ``kept`` None: every item of every chunk).
    """

    def __init__(self, counts: Sequence[int] | np.ndarray, kept: Sequence[np.ndarray | None] | None = None) -> None:
        self.counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        self._item_starts = _prefix(self.counts)
        self._values: np.ndarray | None = None  # the kept items of all chunks, back to back
        if kept is None:
            self.lengths = self.counts
            self.starts = self._item_starts
            return
        if len(kept) != len(self.counts):
            raise ValueError(f"kept lists {len(kept)} chunks but the map has {len(self.counts)}")
        parts = [np.arange(n, dtype=np.int64) if k is None else np.asarray(k, dtype=np.int64).reshape(-1)
                 for k, n in zip(kept, self.counts.tolist())]  # fmt: skip
        self.lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
        self.starts = _prefix(self.lengths)
        values = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        bad = (values < 0) | (values >= np.repeat(self.counts, self.lengths))
        if bad.any():
            chunk = int(np.searchsorted(self.starts, int(np.argmax(bad)), side="right")) - 1
            raise ValueError(f"kept items of chunk {chunk} run past its {int(self.counts[chunk])} items")
        self._values = values

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def keeps_all(self) -> bool:
        """Whether every item of every chunk is a sample, in stored order."""
        return self._values is None

    def _check(self, index: int) -> int:
        total = int(self.starts[-1])
        if not 0 <= index < total:
            raise IndexError(f"sample {index} is out of range: the dataset has {total} samples")
        return index

    def locate(self, index: int) -> tuple[int, int]:
        """(chunk, position among the chunk's samples) of sample ``index`` (from 0).

        Raises:
            IndexError: ``index`` is not a sample of the map.
        """
        index = self._check(int(index))
        chunk = int(np.searchsorted(self.starts, index, side="right")) - 1
        return chunk, index - int(self.starts[chunk])

    def locate_many(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(chunks, positions) of the samples ``indices`` (already checked to be in range)."""
        chunks = np.searchsorted(self.starts, indices, side="right") - 1
        return chunks, indices - self.starts[chunks]

    def item(self, chunk: int, position: int) -> int:
        """The item number, in the chunk's file, of chunk ``chunk``'s ``position``-th sample."""
        if self._values is None:
            return position
        return int(self._values[int(self.starts[chunk]) + position])

    def items(self, chunk: int) -> np.ndarray | None:
        """The item numbers of chunk ``chunk``'s samples, in order; None when they are all its items in order."""
        if self._values is None:
            return None
        return self._values[int(self.starts[chunk]) : int(self.starts[chunk + 1])]

    def kept(self) -> list[np.ndarray | None]:
        """:meth:`items` of every chunk."""
        return [self.items(c) for c in range(len(self.counts))]

    def locate_item(self, position: int) -> tuple[int, int]:
        """(chunk, item) of the ``position``-th item stored, whatever the map keeps (key lookups count so).

        Raises:
            IndexError: the chunks store fewer items.
        """
        total = int(self._item_starts[-1])
        if not 0 <= position < total:
            raise IndexError(f"item {position} is out of range: the chunks store {total} items")
        chunk = int(np.searchsorted(self._item_starts, position, side="right")) - 1
        return chunk, position - int(self._item_starts[chunk])

    def subset(self, indices: np.ndarray) -> SampleMap:
        """The map of samples ``indices`` of this one (ascending, in range), each chunk's in that order."""
        chosen = np.asarray(indices, dtype=np.int64)
        chunks, positions = self.locate_many(chosen)
        lengths = np.bincount(chunks, minlength=len(self.counts)).astype(np.int64)
        items = positions if self._values is None else self._values[self.starts[chunks] + positions]
        bounds = _prefix(lengths)
        return SampleMap(self.counts, [items[bounds[c] : bounds[c + 1]] for c in range(len(self.counts))])
