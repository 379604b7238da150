"""Which sub-dataset each sample of a combined stream comes from.

A worker of a ``CombinedStreamingDataset`` interleaves its stretch of every sub-dataset (``sizes``
samples each) by seeded weighted draws, one uniform per unit (a sample, or a batch under
``per_stream``), in vectorised blocks. The draws are a pure function of their arguments and the
seed, so a stream's length and what each sub-dataset gave in its first ``n`` are known without
reading a sample: that makes resuming exact. A draw picks as upstream's
``random.Random(seed).choices(indexes, weights)`` does, from the same Mersenne Twister
(:func:`python_random_state`), so the same seed and weights pick the same datasets.

Rules (upstream's):

- ``iterate_over_all=True``: a sub-dataset that cannot give a whole unit stays in the draw until
  it is drawn; that draw is spent, the sub-dataset leaves, and the weights of the others are
  renormalised. Once one sub-dataset is left its samples follow without draws; then the leftovers
  (partial batches, ``per_stream`` only) follow in sub-dataset order. Every sample is yielded.
- ``iterate_over_all=False``: draws use the original weights; the stream ends at the first draw
  of a sub-dataset that cannot give a whole unit (after yielding what it has left).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["count_draws", "python_random_state", "draws", "stream_length"]

_BLOCK = 4096


def python_random_state(seed: int, *stream: int) -> np.random.RandomState:
    """A Mersenne Twister for one stream of a seed, seeded the way Python seeds its own.

    With no ``stream`` numbers (or only zeros) its key is exactly ``random.Random(seed)``'s (the
    32-bit words of ``abs(seed)``; also ``np.random.RandomState([seed])``'s), so its uniforms and
    permutations are those upstream draws. Other streams append their numbers to that key
    (trailing zeros dropped, so each key is distinct).
    """
    words: list[int] = []
    rest = abs(int(seed))
    while True:
        words.append(rest & 0xFFFFFFFF)
        rest >>= 32
        if not rest:
            break
    extra = list(stream)
    while extra and extra[-1] == 0:
        extra.pop()
    return np.random.RandomState(words + [int(n) for n in extra])  # a list: seeded by init_by_array


def _picks(weights: Sequence[float], live: Sequence[int], uniforms: np.ndarray) -> np.ndarray:
    """The datasets ``uniforms`` pick among ``live``, as ``random.choices`` picks them."""
    cumulative = np.fromiter(itertools.accumulate(weights[d] for d in live), dtype=np.float64, count=len(live))
    found = np.searchsorted(cumulative[:-1], uniforms * cumulative[-1], side="right")
    return np.asarray(live, dtype=np.int64)[found]


def _first_without_a_unit(picks: np.ndarray, quota: np.ndarray, among: Sequence[int]) -> int:
    """Where ``picks`` first draws a dataset of ``among`` past its ``quota`` of whole units (else ``len(picks)``)."""
    cut = len(picks)
    for d in among:
        hits = np.flatnonzero(picks == d)
        if len(hits) > quota[d]:
            cut = min(cut, int(hits[quota[d]]))
    return cut


def draws(
    sizes: Sequence[int],
    weights: Sequence[float],
    unit: int,
    iterate_over_all: bool,
    rng: np.random.RandomState,
) -> Iterator[np.ndarray]:
    """The sub-dataset of each sample of the stream, in blocks (arrays of sub-dataset numbers)."""
    remaining = np.asarray(sizes, dtype=np.int64).copy()
    count = len(remaining)
    if not iterate_over_all:
        everyone = list(range(count))
        while True:
            picks = _picks(weights, everyone, rng.random_sample(_BLOCK))
            stop = _first_without_a_unit(picks, remaining // unit, everyone)
            taken = picks[:stop]
            remaining -= np.bincount(taken, minlength=count) * unit
            if len(taken):
                yield np.repeat(taken, unit) if unit > 1 else taken
            if stop < _BLOCK:
                last = int(picks[stop])
                if remaining[last] > 0:
                    yield np.full(int(remaining[last]), last, dtype=np.int64)
                return
    current: list[float | None] = [float(w) for w in weights]
    live = list(range(count))
    buffer = np.empty(0)
    while len(live) > 1:
        if sum(current[d] or 0.0 for d in live) <= 0:
            break  # only datasets of weight 0 are left, and those are empty (weights follow sizes)
        if not len(buffer):
            buffer = rng.random_sample(_BLOCK)
        picks = _picks(current, live, buffer)  # type: ignore[arg-type]
        # Cut the block at the first draw of a dataset that has no whole unit left: that draw is
        # spent on it, it leaves, and the uniforms after it are mapped with the new weights.
        cut = _first_without_a_unit(picks, remaining // unit, live)
        taken = picks[:cut]
        remaining -= np.bincount(taken, minlength=count) * unit
        if len(taken):
            yield np.repeat(taken, unit) if unit > 1 else taken
        if cut == len(picks):
            buffer = buffer[cut:]
            continue
        gone = int(picks[cut])
        buffer = buffer[cut + 1 :]
        live.remove(gone)
        current[gone] = None
        total = sum(w for w in current if w is not None)  # the same sum (and rounding) as upstream's
        if total > 0:  # else only empty datasets of weight 0 are left: the loop ends
            current = [None if w is None else w / total for w in current]
    if len(live) == 1 and remaining[live[0]] >= unit:
        whole = int(remaining[live[0]] // unit * unit)
        remaining[live[0]] -= whole
        yield np.full(whole, live[0], dtype=np.int64)
    for d in range(count):
        if remaining[d] > 0:
            yield np.full(int(remaining[d]), d, dtype=np.int64)


def stream_length(
    sizes: Sequence[int], weights: Sequence[float], unit: int, iterate_over_all: bool, rng: np.random.RandomState
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
    rng: np.random.RandomState,
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
