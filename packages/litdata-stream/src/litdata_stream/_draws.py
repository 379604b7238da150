"""Which sub-dataset each sample of a combined stream comes from.

A worker of a ``CombinedStreamingDataset`` holds one stretch of every sub-dataset (``sizes``
samples each) and interleaves them by seeded weighted draws. The draws are a pure function of
``(sizes, weights, unit, iterate_over_all)`` and the generator's seed, made in vectorised blocks:
one uniform number per unit (a sample, or a whole batch under ``per_stream``) mapped through the
cumulative weights of the sub-datasets still drawable. So the stream can be replayed anywhere:
its length, and how many samples each sub-dataset gave in its first ``n``, are known without
reading a sample, which is what makes resuming exact.

Rules:

- ``iterate_over_all=True``: a sub-dataset leaves the draw once it cannot give a whole unit, and
  the weights of the others are renormalised; when none can, the leftovers (partial batches,
  ``per_stream`` only) follow in sub-dataset order. Every sample of every stretch is yielded.
- ``iterate_over_all=False``: draws use the original weights; the stream ends at the first draw
  of a sub-dataset that cannot give a whole unit (after yielding what it has left).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["count_draws", "draws", "stream_length"]

_BLOCK = 4096


def _cdf(weights: np.ndarray) -> np.ndarray:
    total = weights.sum()
    if total <= 0:
        raise ValueError("at least one dataset needs a positive weight")
    cdf = np.cumsum(weights / total)
    cdf[-1] = 1.0
    return cdf


def draws(
    sizes: Sequence[int], weights: Sequence[float], unit: int, iterate_over_all: bool, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """The sub-dataset of each sample of the stream, in blocks (arrays of sub-dataset numbers)."""
    remaining = np.asarray(sizes, dtype=np.int64).copy()
    weight = np.asarray(weights, dtype=np.float64)
    count = len(remaining)
    if not iterate_over_all:
        cdf = _cdf(weight)
        while True:
            picks = np.searchsorted(cdf, rng.random(_BLOCK), side="right")
            quota = remaining // unit
            stop = _BLOCK
            for d in range(count):
                hits = np.flatnonzero(picks == d)
                if len(hits) > quota[d]:
                    stop = min(stop, int(hits[quota[d]]))
            taken = picks[:stop]
            remaining -= np.bincount(taken, minlength=count) * unit
            if len(taken):
                yield np.repeat(taken, unit) if unit > 1 else taken
            if stop < _BLOCK:
                last = int(picks[stop])
                if remaining[last] > 0:
                    yield np.full(int(remaining[last]), last, dtype=np.int64)
                return
    buffer = np.empty(0)
    while True:
        quota = remaining // unit
        live = quota > 0
        if not live.any():
            break
        chance = np.where(live, weight, 0.0)
        if chance.sum() <= 0:
            chance = live.astype(np.float64)
        if not len(buffer):
            buffer = rng.random(_BLOCK)
        picks = np.searchsorted(_cdf(chance), buffer, side="right")
        # A sub-dataset leaves the draw right after its last whole unit: cut the block there and
        # map the uniforms after the cut with the new weights (each uniform is used exactly once).
        cut = len(picks)
        for d in np.flatnonzero(live).tolist():
            hits = np.flatnonzero(picks == d)
            if len(hits) >= quota[d]:
                cut = min(cut, int(hits[quota[d] - 1]) + 1)
        taken, buffer = picks[:cut], buffer[cut:]
        remaining -= np.bincount(taken, minlength=count) * unit
        yield np.repeat(taken, unit) if unit > 1 else taken
    for d in range(count):
        if remaining[d] > 0:
            yield np.full(int(remaining[d]), d, dtype=np.int64)


def stream_length(
    sizes: Sequence[int], weights: Sequence[float], unit: int, iterate_over_all: bool, rng: np.random.Generator
) -> int:
    """How many samples the stream holds."""
    if iterate_over_all:
        return int(sum(sizes))
    return sum(len(block) for block in draws(sizes, weights, unit, iterate_over_all, rng))


def count_draws(
    sizes: Sequence[int],
    weights: Sequence[float],
    unit: int,
    iterate_over_all: bool,
    rng: np.random.Generator,
    first: int,
) -> list[int]:
    """How many of the stream's first ``first`` samples each sub-dataset gave."""
    counts = np.zeros(len(sizes), dtype=np.int64)
    left = first
    if left > 0:
        for block in draws(sizes, weights, unit, iterate_over_all, rng):
            part = block[:left]
            counts += np.bincount(part, minlength=len(sizes))
            left -= len(part)
            if left <= 0:
                break
    return counts.tolist()
