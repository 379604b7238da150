"""Resuming from a ``state_dict`` saved by upstream LitData 0.2.x, mid-epoch.

Upstream's epoch order is its own (chunks split over the workers one after another, in an order
drawn with NumPy's ``RandomState``), so the rest of that epoch can only be told from that order.
:class:`UpstreamOrder` rebuilds it as one sequence ``S`` (the workers' sequences one after another,
rank by rank), which ``_pass_plan`` then treats like any other epoch order: with upstream's topology
the split of ``S`` is upstream's, so the delivered batches tell what every worker consumed. The
epochs after it follow this library's order.

Rebuilt: a single node, ``shuffle`` off (``NoShuffle``) or on (``FullShuffle``, with its
``item_shuffle_window``), and no ``subsample``. Anything else is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np

from litdata_stream._pass_plan import (
    EpochOrder,
    Interval,
    Topology,
    WorkerPlan,
    consumed_per_worker,
    remaining_base,
    split_base,
)
from litdata_stream._state_fields import MAX_WORKER_SLOTS, state_int

__all__ = [
    "UpstreamOrder",
    "UpstreamResume",
    "is_upstream_state",
    "resume_point",
    "upstream_plans",
    "upstream_resume",
    "upstream_state_fields",
]

# What upstream records in a StreamingDataset's state and this library does not.
_UPSTREAM_FIELDS = ("input_dir_path", "region_of_interest", "sample_in_epoch")


def is_upstream_state(state: dict[str, Any]) -> bool:
    """Whether ``state`` is a StreamingDataset state written by upstream LitData."""
    return "base" not in state and any(field in state for field in _UPSTREAM_FIELDS)


@dataclass(frozen=True)
class UpstreamResume:
    """What an upstream state says: the epoch, how upstream ordered it, and what was delivered."""

    epoch: int
    topology: Topology
    item_window: int
    samples_yielded: int  # by this rank's loader in the epoch (per rank, as upstream counts)

    def order_key(self) -> list[Any]:
        """What rebuilds the order (kept in this library's own state dicts of that epoch)."""
        t = self.topology
        return [t.world_size, t.num_workers, t.batch_size, t.drop_last, self.item_window]


def upstream_resume(state: dict[str, Any], where: str, lengths: Sequence[int], shuffle: bool,
                    seed: int) -> UpstreamResume:  # fmt: skip
    """Read the dataset part of upstream's state dict, refusing what this dataset cannot resume exactly.

    ``where`` names the dataset in errors; ``lengths`` are its samples per chunk.
    """

    def refuse(reason: str) -> ValueError:
        return ValueError(f"{where}: this upstream LitData state dict cannot be resumed exactly: {reason}")

    regridded = any(
        f"initial_{field}" in state and state[f"initial_{field}"] != state.get(field)
        for field in ("world_size", "num_workers", "batch_size")
    )
    if state.get("resume_mode") == "elastic" or regridded:
        raise refuse(
            "it was saved after an elastic resume (another number of ranks, workers or batch size than its "
            "first run), whose order upstream derives from a canonical stream this library does not rebuild; "
            "resume it with upstream LitData until the epoch ends"
        )
    if int(state.get("initial_num_nodes", 1)) > 1:
        raise refuse("it was recorded on several nodes, whose chunk placement this library does not rebuild")
    for field, ours in (("shuffle", shuffle), ("seed", seed)):
        if field in state and state[field] != ours:
            raise refuse(f"it was recorded with {field}={state[field]!r} but this dataset has {field}={ours!r}")
    roi = state.get("region_of_interest")
    if roi is not None and not _whole_chunks(roi, lengths):
        raise refuse(
            "it was recorded on a subsampled dataset (or another one: its region_of_interest does not cover "
            f"this dataset's {len(lengths)} chunks of {list(lengths)[:8]}... samples); subsample is not resumed"
        )
    world = state_int(state, "world_size", where, low=1, high=MAX_WORKER_SLOTS, default=1)
    workers = max(1, state_int(state, "num_workers", where, high=MAX_WORKER_SLOTS // world, default=1))
    batch = max(1, state_int(state, "batch_size", where, default=1))
    return UpstreamResume(
        epoch=state_int(state, "current_epoch", where, default=1),
        topology=Topology(world, workers, batch, bool(state.get("drop_last", False))),
        item_window=_item_window(state.get("item_shuffle_window", 0)),
        samples_yielded=state_int(state, "num_samples_yielded", where, default=0),
    )


def _whole_chunks(roi: Any, lengths: Sequence[int]) -> bool:
    """Whether upstream's ``region_of_interest`` is every chunk whole, ``[(0, n), ...]`` (a long list unread)."""
    if not isinstance(roi, (list, tuple)) or len(roi) != len(lengths):  # pyright: ignore[reportUnknownArgumentType]
        return False
    return all(isinstance(r, (list, tuple)) and tuple(r) == (0, n) for r, n in zip(roi, lengths))  # pyright: ignore[reportUnknownArgumentType]


def _item_window(value: Any) -> int:
    """Upstream's in-chunk shuffle block (0: a full permutation), as its state records it."""
    if isinstance(value, bool):
        return 256 if value else 0
    text = str(value).strip().lower()
    if text in ("", "auto"):
        return 256
    if text in ("full", "off", "all"):
        return 0
    return max(0, int(text))


class UpstreamOrder(EpochOrder):
    """The order upstream LitData gives one epoch under one topology, as a sequence ``S``.

    ``key`` is :meth:`UpstreamResume.order_key` (the topology and the in-chunk shuffle block).
    """

    def __init__(self, chunk_lengths: Sequence[int] | np.ndarray, seed: int, epoch: int, shuffle: bool,
                 key: Sequence[Any]) -> None:  # fmt: skip
        world, workers, batch, drop_last, window = key
        self.key = list(key)
        lengths = [int(n) for n in chunk_lengths]
        count = len(lengths)
        if shuffle and count:
            visit = np.random.RandomState([seed, epoch]).permutation(count).tolist()
        else:
            visit = list(range(count))
        # S is every worker's parts in turn; a chunk split over workers has its parts side by side.
        self._parts: dict[int, list[tuple[int, int]]] = {}
        taken = np.zeros(count, dtype=np.int64)
        for chunk, lo, hi in _assign(lengths, visit, Topology(world, workers, batch, drop_last)):
            self._parts.setdefault(chunk, []).append((lo, hi))
            taken[chunk] += hi - lo
        self._window, self._count = int(window), count
        self.chunk_lengths = taken
        self.seed, self.epoch, self.shuffle = seed, epoch, shuffle
        order = list(self._parts)  # (dicts keep the order chunks were first dealt in)
        self.chunk_order = np.asarray(order + [c for c in range(count) if c not in self._parts], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(taken[self.chunk_order])])

    def within(self, chunk: int) -> np.ndarray:
        """The chunk's items upstream deals, in its order: each worker's part shuffled on its own."""
        spans = []
        for lo, hi in self._parts.get(chunk, []):
            span = list(range(lo, hi))
            if self.shuffle:
                rng = np.random.RandomState([self.seed, self._count, self.epoch, chunk])
                span = _block_shuffle(span, self._window, rng)
            spans.append(np.asarray(span, dtype=np.int64))
        return np.concatenate(spans) if spans else np.empty(0, dtype=np.int64)


def upstream_shares(total: int, topology: Topology) -> list[int]:
    """Samples of each worker of every rank (rank by rank) in upstream's split of ``total``."""
    world, workers, batch = topology.world_size, topology.num_workers, topology.batch_size
    per_rank = (total // batch) // world
    shares = [(per_rank // workers + (1 if w < per_rank % workers else 0)) * batch for w in range(workers)] * world
    left = total - sum(shares)
    if not topology.drop_last and left > 0:
        shares[(world - 1) * workers + (per_rank % workers)] += left
    return shares


def upstream_plans(length: int, topology: Topology) -> list[list[WorkerPlan]]:
    """``plans[rank][worker]``: each worker's stretch of an :class:`UpstreamOrder` of ``length``."""
    shares = upstream_shares(length, topology)
    starts = [0, *accumulate(shares)]
    plans = [WorkerPlan(((starts[i], starts[i] + n),)) for i, n in enumerate(shares)]
    workers = topology.num_workers
    return [plans[rank * workers : (rank + 1) * workers] for rank in range(topology.world_size)]


def resume_point(length: int, found: UpstreamResume) -> tuple[list[Interval], int, bool]:
    """(base, batches delivered, exact) to resume an :class:`UpstreamOrder` of ``length`` from.

    Where this library splits ``S`` as upstream does (always on one rank, and with ``drop_last``),
    the base is the whole epoch and the delivered batches tell each worker's progress: the rest
    comes in upstream's order. Otherwise the base is what no worker had consumed (upstream's
    count: batches in turn from worker 0), with nothing delivered of it: the same samples,
    in this library's split.
    """
    topology = found.topology
    batches = -(-found.samples_yielded // topology.batch_size)
    shares = upstream_shares(length, topology)
    ours = [plan.num_samples for rank in split_base([(0, length)], topology) for plan in rank]
    if ours == shares:
        return [(0, length)], batches, True
    plans = upstream_plans(length, topology)
    consumed = [consumed_per_worker(row, topology.batch_size, topology.drop_last, batches)[0] for row in plans]
    return remaining_base(plans, consumed), 0, False


def _assign(lengths: list[int], visit: list[int], topology: Topology) -> list[tuple[int, int, int]]:
    """Upstream's split of an epoch: (chunk, first item, end) parts, worker after worker.

    Every worker gets whole batches (the ranks' shares first, then the workers' of each rank);
    without ``drop_last`` the samples left go to the last rank's worker after the last full one.
    Chunks are dealt in ``visit`` order, each filling the current worker and spilling into the next.
    """
    shares = upstream_shares(sum(lengths), topology)
    parts: list[tuple[int, int, int]] = []
    worker = 0
    for chunk in visit:
        lo, hi = 0, lengths[chunk]
        while lo < hi and worker < len(shares):
            if shares[worker] == 0:
                worker += 1
                continue
            step = min(hi - lo, shares[worker])
            parts.append((chunk, lo, lo + step))
            shares[worker] -= step
            lo += step
    return parts


def _block_shuffle(items: list[int], window: int, rng: np.random.RandomState) -> list[int]:
    """Upstream's in-chunk order: a full permutation, or (``window`` > 1) aligned blocks shuffled within, then among."""
    if len(items) < 2:
        return list(items)
    if window <= 1:
        return rng.permutation(items).tolist()
    blocks = [items[start : start + window] for start in range(0, len(items), window)]
    for block in blocks:
        rng.shuffle(block)
    if len(blocks) > 1:
        rng.shuffle(blocks)
    return [item for block in blocks for item in block]


def upstream_state_fields(
    topology: Topology,
    epoch: int,
    batches: int,
    *,
    directory: Path | None,
    url: str | None,
    cache_dir: str | Path | None,
    block_size: int | None,
    num_canonical_nodes: int | None,
    num_nodes: int,
) -> dict[str, Any]:
    """What upstream LitData 0.2.76's ``StreamingDataset`` reads from a state dict, so that it loads ours.

    Upstream resumes by skipping, in each worker, as many samples of its own order of the epoch as
    the loader delivered from that worker (see docs/streaming.md). ``batches``: delivered in ``epoch``
    by this rank's loader; ``block_size``: a ``TokensLoader``'s (None for other item loaders).
    """
    workers, world = max(topology.num_workers, 1), topology.world_size
    yielded = batches * topology.batch_size  # upstream counts whole batches from the epoch's start
    return {
        "num_samples_yielded": yielded,
        "num_workers": workers,
        "batch_size": topology.batch_size,
        "current_epoch": epoch,
        "input_dir_path": str(directory.resolve()) if directory is not None else None,
        "input_dir_url": url,
        "cache_dir_path": None if cache_dir is None else str(cache_dir),
        "item_loader": {"block_size": block_size} if block_size is not None else {},
        "sample_in_epoch": yielded * world,
        "num_canonical_nodes": int(num_canonical_nodes or world),
        "initial_world_size": world,
        "initial_num_workers": workers,
        "initial_batch_size": topology.batch_size,
        "initial_num_nodes": num_nodes,
    }
