"""Which sample each worker of each rank reads, in which order, and how a resume continues.

One mechanism serves shuffling, DDP, worker splits, ``drop_last`` and exact resume:

1. The epoch order. For an epoch, the dataset's samples form one global sequence ``S``: the
   chunks in an order (a permutation seeded by ``(seed, epoch)`` when shuffling), and inside each
   chunk its samples in an order (a permutation seeded by ``(seed, epoch, chunk)``). ``S`` depends
   only on the data, the seed, the epoch and the shuffle flag, never on the number of ranks or
   workers.
2. The base. What is still to be read this epoch is a list of intervals of positions in ``S``
   (``[(0, len(S))]`` at the start of an epoch).
3. The split. The base is cut into one contiguous stretch per (rank, worker): every rank gets
   the same number of batches when ``drop_last`` is set (the tail is dropped), and inside a rank
   every worker gets whole batches, so the DataLoader yields exactly ``len()`` samples.
4. Progress. The DataLoader delivers batches round-robin over workers (a finished worker drops
   out), so the number of batches delivered tells exactly how many samples each worker of every
   rank consumed. A resume with the same topology continues each worker where it stopped, with
   the worker that was due next placed first, so the order is the same as if never interrupted.
   A resume with another topology takes what was not consumed as the new base and splits it
   again: nothing is repeated and nothing is skipped.

A stretch of ``S`` maps to a few ``(chunk, lo, hi)`` pieces, so workers read whole runs of a chunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np

__all__ = [
    "EpochOrder",
    "Piece",
    "Topology",
    "WorkerPlan",
    "batch_count",
    "batches_left",
    "consumed_by_rank",
    "consumed_per_worker",
    "delivered_before",
    "rank_shares",
    "rebase_resume",
    "remaining_base",
    "skip_samples",
    "split_base",
]

Interval = tuple[int, int]


@dataclass(frozen=True)
class Topology:
    """How the reading is spread: ranks, workers per rank, batch size, and whether tails drop."""

    world_size: int = 1
    num_workers: int = 1
    batch_size: int = 1
    drop_last: bool = False

    def __post_init__(self) -> None:
        for name in ("world_size", "num_workers", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    @property
    def key(self) -> tuple[int, int, int, bool]:
        """(world size, workers, batch size, drop_last): how state dicts record a topology."""
        return (self.world_size, self.num_workers, self.batch_size, self.drop_last)


@dataclass(frozen=True)
class Piece:
    """Samples ``order[lo:hi]`` of chunk ``chunk``, where ``order`` is that chunk's epoch order."""

    chunk: int
    lo: int
    hi: int


class EpochOrder:
    """The global sequence ``S`` of one (1-based) epoch over chunks of ``chunk_lengths`` samples."""

    def __init__(self, chunk_lengths: Sequence[int] | np.ndarray, seed: int, epoch: int, shuffle: bool) -> None:
        self.chunk_lengths = np.asarray(chunk_lengths, dtype=np.int64)
        self.seed, self.epoch, self.shuffle = seed, epoch, shuffle
        count = len(self.chunk_lengths)
        if shuffle and count:
            self.chunk_order = np.random.default_rng([seed, epoch, count]).permutation(count)
        else:
            self.chunk_order = np.arange(count)
        # The hash state of (seed, epoch, chunk count): each chunk's in-chunk order continues from it.
        self._hash_state = hash_state(0x9E3779B97F4A7C15, seed, epoch, count)
        self._orders: np.ndarray | None = None  # every chunk's in-chunk order at once (see within)
        self._orders_tried = False
        # starts[k] = position in S where the k-th chunk of the order begins.
        self.starts = np.concatenate([[0], np.cumsum(self.chunk_lengths[self.chunk_order])])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def within(self, chunk: int) -> np.ndarray:
        """The order of chunk ``chunk``'s samples (indexes into its own sample list)."""
        length = int(self.chunk_lengths[chunk])
        if not self.shuffle:
            return np.arange(length)
        if not self._orders_tried:
            self._orders_tried = True
            self._orders = self._all_orders()
        orders = self._orders
        if orders is not None and orders.shape[1] == length:
            return orders[chunk]
        return permutation_from(hash_state(self._hash_state, chunk), length)

    def _all_orders(self) -> np.ndarray | None:
        """Every chunk's in-chunk order as rows of one array, when the chunks are small and alike.

        The same permutations as :func:`permutation_from`, in a few numpy calls for all chunks of
        the most common length (the others are computed one by one); None past ``_ORDERS_AT_ONCE`` samples.
        """
        lengths = self.chunk_lengths
        if not len(lengths):
            return None
        length = int(np.bincount(lengths).argmax()) if int(lengths.max()) <= _ORDERS_MAX_LENGTH else 0
        if length < 2 or len(lengths) * length > _ORDERS_AT_ONCE:
            return None
        golden = np.uint64(0x9E3779B97F4A7C15)
        chunks = np.arange(len(lengths), dtype=np.uint64)
        states = _mix_array((chunks ^ np.uint64(self._hash_state)) + golden)  # hash_state(prefix, chunk)
        keys = _mix_array(states[:, None] + np.arange(length, dtype=np.uint64)[None, :] * golden)
        orders = np.argsort(keys, axis=1, kind="stable")
        orders.flags.writeable = False  # rows are handed out as views: nobody may change them
        return orders

    def __getstate__(self) -> dict[str, Any]:
        # The orders are rebuilt where they are read (a worker), not pickled to it.
        return {**self.__dict__, "_orders": None, "_orders_tried": False}

    def read_order(self, intervals: Sequence[Interval]) -> list[Interval]:
        """The intervals of ``S`` one worker's stretch is read in (here unchanged).

        Another order (``WindowOrder``) may permute whole intervals only, so what a worker consumed
        is a prefix of this list (``remaining_base``).
        """
        return list(intervals)

    def pieces(self, intervals: Sequence[Interval]) -> list[Piece]:
        """The chunk pieces covering the given intervals of ``S``, in order."""
        out: list[Piece] = []
        for start, end in intervals:
            k = int(np.searchsorted(self.starts, start, side="right")) - 1
            position = start
            while position < end:
                chunk_start, chunk_end = int(self.starts[k]), int(self.starts[k + 1])
                stop = min(end, chunk_end)
                if stop > position:
                    out.append(Piece(int(self.chunk_order[k]), position - chunk_start, stop - chunk_start))
                position = stop
                k += 1
        return out


_MASK = (1 << 64) - 1
_ORDERS_AT_ONCE = 1 << 20  # samples: 8 MiB of orders at most
_ORDERS_MAX_LENGTH = 256


def _mix_array(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping, as :func:`_mix` masks), in place."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _mix(value: int) -> int:
    """splitmix64's finaliser on a Python int (64 bits)."""
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def hashed_permutation(length: int, *key: int) -> np.ndarray:
    """A permutation of ``range(length)`` that is a pure function of ``key`` (ints).

    The positions sorted by a splitmix64 hash of (key, position): far cheaper per chunk than
    seeding a numpy generator.
    """
    return permutation_from(hash_state(0x9E3779B97F4A7C15, *key), length)


def hash_state(state: int, *key: int) -> int:
    """The hash state after mixing in ``key`` (ints) from ``state`` (a key's prefix is mixed once, then reused)."""
    for part in key:
        state = _mix((state ^ (part & _MASK)) + 0x9E3779B97F4A7C15 & _MASK)
    return state


def permutation_from(state: int, length: int) -> np.ndarray:
    """The permutation of ``range(length)`` that :func:`hashed_permutation` gives for the key hashed into ``state``."""
    if length < 2:
        return np.arange(length)
    if length <= 64:  # the same hashes in Python ints: numpy's per-call cost dominates small chunks
        keys = [_mix((i * 0x9E3779B97F4A7C15 + state) & _MASK) for i in range(length)]
        return np.array(sorted(range(length), key=keys.__getitem__), dtype=np.int64)
    x = np.arange(length, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(state)
    return np.argsort(_mix_array(x), kind="stable")


def _take(base: Sequence[Interval], offset: int, count: int) -> list[Interval]:
    """``count`` positions of the flattened base starting at flattened position ``offset``."""
    out: list[Interval] = []
    seen = 0
    for start, end in base:
        length = end - start
        if seen + length > offset and count > 0:
            lo = start + max(0, offset - seen)
            hi = min(end, lo + count)
            out.append((lo, hi))
            count -= hi - lo
            offset += hi - lo
        seen += length
        if count <= 0:
            break
    return out


def _shares(total: int, parts: int, batch_size: int, drop_last: bool) -> list[int]:
    """Split ``total`` samples into ``parts`` counts of whole batches.

    Without ``drop_last`` the partial batch goes to the part after the last full one, as a plain DataLoader's.
    """
    batches, rest = divmod(total, batch_size)
    per = [batches // parts + (1 if i < batches % parts else 0) for i in range(parts)]
    counts = [n * batch_size for n in per]
    if rest and not drop_last:
        counts[batches % parts] += rest
    return counts


@dataclass(frozen=True)
class WorkerPlan:
    """What one worker reads: intervals of ``S`` in order, and how many samples that is."""

    intervals: tuple[Interval, ...]

    @property
    def num_samples(self) -> int:
        return sum(end - start for start, end in self.intervals)


def split_base(base: Sequence[Interval], topology: Topology) -> list[list[WorkerPlan]]:
    """``plans[rank][worker]``: the base cut into one stretch per worker of every rank."""
    total = sum(end - start for start, end in base)
    world, workers, batch = topology.world_size, topology.num_workers, topology.batch_size
    if topology.drop_last:
        per_rank = [(total // (batch * world)) * batch] * world
    else:
        per_rank = [total // world + (1 if r < total % world else 0) for r in range(world)]
    counts = [n for rank in range(world) for n in _shares(per_rank[rank], workers, batch, topology.drop_last)]
    starts = [0, *accumulate(counts)]
    plans = [WorkerPlan(tuple(_take(base, starts[i], n))) for i, n in enumerate(counts)]
    return [plans[rank * workers : (rank + 1) * workers] for rank in range(world)]


def batch_count(samples: int, batch_size: int, drop_last: bool = False) -> int:
    """The batches ``samples`` samples make: the full ones, and the partial one unless ``drop_last``."""
    full, rest = divmod(samples, batch_size)
    return full + (1 if rest and not drop_last else 0)


def skip_samples(intervals: Sequence[Interval], count: int) -> list[Interval]:
    """``intervals`` without their first ``count`` samples."""
    out = []
    for start, end in intervals:
        if count >= end - start:
            count -= end - start
            continue
        out.append((start + count, end))
        count = 0
    return out


def batches_left(plan: WorkerPlan, done: int, topology: Topology) -> int:
    """The batches a worker still delivers from ``plan`` after it delivered ``done`` of its samples."""
    return batch_count(plan.num_samples, topology.batch_size, topology.drop_last) - batch_count(
        done, topology.batch_size
    )


def consumed_per_worker(
    plans: Sequence[WorkerPlan], batch_size: int, drop_last: bool, batches_delivered: int, first_worker: int = 0
) -> tuple[list[int], int]:
    """Samples each worker has delivered after ``batches_delivered`` batches, and who is due next.

    The DataLoader asks workers round-robin starting at ``first_worker``; a worker that has no
    batch left drops out of the rotation.
    """
    workers = len(plans)
    left = [batch_count(p.num_samples, batch_size, drop_last) for p in plans]
    done_batches = [0] * workers
    remaining = batches_delivered
    turn = first_worker
    # Whole rounds at once while every worker still has batches, then one at a time.
    while remaining > 0 and any(left):
        active = [w for w in range(workers) if left[w] > 0]
        rounds = min(*(left[w] for w in active), remaining // len(active))
        if rounds > 0:
            for w in active:
                left[w] -= rounds
                done_batches[w] += rounds
            remaining -= rounds * len(active)
            continue
        while left[turn % workers] == 0:
            turn += 1
        w = turn % workers
        left[w] -= 1
        done_batches[w] += 1
        remaining -= 1
        turn += 1
    if remaining > 0:
        raise ValueError(f"{batches_delivered} batches were delivered but the plan only holds fewer")
    samples = [min(done_batches[w] * batch_size, plans[w].num_samples) for w in range(workers)]
    # The next worker due: continue the rotation from where it stopped.
    next_worker = turn % workers
    for _ in range(workers):
        if left[next_worker] > 0:
            break
        next_worker = (next_worker + 1) % workers
    return samples, next_worker


def remaining_base(
    plans: Sequence[Sequence[WorkerPlan]], consumed: Sequence[Sequence[int]], order: EpochOrder | None = None
) -> list[Interval]:
    """What no worker of any rank has consumed, as a new base; ``order`` tells how each read its stretch."""
    out: list[Interval] = []
    for rank_plans, rank_consumed in zip(plans, consumed):
        for plan, done in zip(rank_plans, rank_consumed):
            read = order.read_order(plan.intervals) if order is not None else plan.intervals
            out.extend(_take(read, done, plan.num_samples - done))
    return _merge(sorted(out))


def _interrupted(resume: Mapping[str, Any]) -> tuple[list[list[WorkerPlan]], list[list[int]]]:
    """The plans of an interrupted run (with its own topology) and what each worker of each rank consumed."""
    world, workers, batch, drop_last = resume["topology"]
    plans = split_base(resume["base"], Topology(world, workers, batch, drop_last))
    consumed = [
        consumed_per_worker(rank, batch, drop_last, resume["batches"], resume["first_worker"])[0] for rank in plans
    ]
    return plans, consumed


def rebase_resume(resume: Mapping[str, Any], order: EpochOrder | None = None) -> list[Interval]:
    """What an interrupted run (a state dict's ``topology``, ``base``, ``batches``, ``first_worker``) left."""
    return remaining_base(*_interrupted(resume), order)


def rank_shares(
    start: tuple[Sequence[Interval], int, int], topology: Topology, rank: int
) -> list[tuple[WorkerPlan, int]]:
    """For each DataLoader worker of ``rank``: (its plan, how many of its samples are done).

    ``start`` is (base, first worker, batches delivered) of the pass. Workers are relabelled so that
    the one due next comes first (the DataLoader always starts at worker 0): the resumed order is unchanged.
    """
    base, first, delivered = start
    plans = split_base(base, topology)[rank]
    consumed, due = consumed_per_worker(plans, topology.batch_size, topology.drop_last, delivered, first)
    workers = topology.num_workers
    return [(plans[(i + due) % workers], consumed[(i + due) % workers]) for i in range(workers)]


def delivered_before(resume: Mapping[str, Any] | None, epoch: int, rank: int) -> tuple[int, int]:
    """(batches, samples) ``rank`` delivered of ``epoch`` before the loaded state ``resume`` (else 0, 0)."""
    if resume is None or resume["epoch"] != epoch:
        return 0, 0
    return resume["batches"], consumed_by_rank(resume, rank)


def consumed_by_rank(resume: Mapping[str, Any], rank: int) -> int:
    """The samples rank ``rank`` of an interrupted run had consumed (0 for a rank that run did not have)."""
    consumed = _interrupted(resume)[1]
    return sum(consumed[rank]) if rank < len(consumed) else 0


def _merge(intervals: Sequence[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in intervals:
        if end <= start:
            continue
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
