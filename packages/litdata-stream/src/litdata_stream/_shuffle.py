"""The window shuffle: another epoch order for datasets on network and parallel filesystems.

``EpochOrder`` (the full shuffle) permutes all chunks, so every worker jumps between files.
``WindowOrder`` keeps the storage order instead, so each worker reads a sequential stripe of
chunks, and shuffles only locally, in a sliding window of ``window`` places:

- ``S`` is the chunks in storage order, rotated by an offset drawn from ``(seed, epoch)`` (so the
  stripes, and under ``drop_last`` the dropped tail, move from epoch to epoch), with each chunk's
  samples in a window-shuffled order.
- A worker reads the chunks of its stretch in a window-shuffled order (``read_order``).

It permutes whole chunk pieces of the stretch, so what a worker consumed is a prefix of its read
order made of intervals of ``S``: resuming stays exact, under any topology (see ``_pass_plan``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from litdata_stream._pass_plan import EpochOrder, Interval

__all__ = ["WindowOrder", "window_permutation"]


def window_permutation(count: int, window: int, rng: np.random.Generator) -> np.ndarray:
    """A permutation of ``range(count)`` moving each element fewer than ``window`` places."""
    # Positions sorted by ``position + U[0, window)``.
    positions = np.arange(count, dtype=np.int64)
    if count < 2 or window <= 1:
        return positions
    keys = positions + rng.random(count) * window
    return np.argsort(keys, kind="stable")


class WindowOrder(EpochOrder):
    """The epoch order of the window shuffle: ``window`` is how far a chunk or a sample may move."""

    def __init__(self, chunk_lengths: Sequence[int] | np.ndarray, seed: int, epoch: int, window: int) -> None:
        if window < 1:
            raise ValueError(f"the shuffle window must be at least 1, got {window}")
        self.window = int(window)
        super().__init__(chunk_lengths, seed, epoch, shuffle=True)
        count = len(self.chunk_lengths)
        shift = int(np.random.default_rng([seed, epoch, count, 1]).integers(count)) if count else 0
        self.chunk_order = np.roll(np.arange(count), -shift)
        self.starts = np.concatenate([[0], np.cumsum(self.chunk_lengths[self.chunk_order])])
        self._cached: tuple[int, np.ndarray] | None = None

    def within(self, chunk: int) -> np.ndarray:
        if self._cached is not None and self._cached[0] == chunk:
            return self._cached[1]
        rng = np.random.default_rng([self.seed, self.epoch, len(self.chunk_lengths), chunk, 2])
        order = window_permutation(int(self.chunk_lengths[chunk]), self.window, rng)
        self._cached = (chunk, order)
        return order

    def read_order(self, intervals: Sequence[Interval]) -> list[Interval]:
        """The stretch cut at chunk boundaries, the pieces window-shuffled (seeded by the stretch itself)."""
        pieces: list[Interval] = []
        for start, end in intervals:
            k = int(np.searchsorted(self.starts, start, side="right")) - 1
            position = start
            while position < end:
                stop = min(end, int(self.starts[k + 1]))
                if stop > position:
                    pieces.append((position, stop))
                position = stop
                k += 1
        if len(pieces) < 2:
            return pieces
        total = sum(end - start for start, end in pieces)
        rng = np.random.default_rng([self.seed, self.epoch, pieces[0][0], total, 3])
        return [pieces[i] for i in window_permutation(len(pieces), self.window, rng).tolist()]
