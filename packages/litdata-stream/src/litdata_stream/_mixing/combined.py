"""``CombinedStreamingDataset``: samples drawn from several datasets by weight, resumable exactly.

Every sub-dataset is split over ranks and workers as a lone :class:`StreamingDataset` would be
(``_pass_plan``). A worker interleaves its stretches by draws (``_draws``) seeded by ``(seed, epoch,
segment, rank, worker)``; the first epoch's stream of rank 0, worker 0 draws what upstream LitData
draws for the seed. The batches the loader delivered tell how many samples each worker delivered,
and replaying its draws how many came from each sub-dataset. A resume under another topology
takes what no worker consumed as each sub-dataset's new base and starts a new *segment* of draws.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from litdata_stream._collate import Batching, concat_batches, interleave, unbatch
from litdata_stream._dataset import StreamingDataset, adopt_upstream_order
from litdata_stream._draws import count_draws, draws, python_random_state, stream_length
from litdata_stream._env import WorkerEnv
from litdata_stream._mixing.shared import MixedDataset, round_robin
from litdata_stream._pass_plan import (
    EpochOrder,
    Interval,
    Topology,
    WorkerPlan,
    batch_count,
    remaining_base,
    skip_samples,
    split_base,
)
from litdata_stream._protocol import LoaderPlan, delivered_batches
from litdata_stream._read import StreamingReader
from litdata_stream._state_fields import state_base, state_int, state_topology
from litdata_stream._takers import Taker
from litdata_stream._upstream_state import upstream_plans

__all__ = ["CombinedStreamingDataset"]

BatchingMethod = Literal["stratified", "per_stream"]
_METHODS = ("stratified", "per_stream")
_END = object()


class CombinedStreamingDataset(MixedDataset):
    """Stream several :class:`StreamingDataset` as one, mixing them by weight.

    Args:
        datasets: the datasets to mix.
        seed: seeds the draws that pick which dataset each sample (or batch) comes from.
        weights: the share of each dataset (normalised to sum to 1). Only with
            ``iterate_over_all=False``; by default each dataset weighs its number of samples.
        iterate_over_all: go on until every dataset is exhausted (an exhausted dataset leaves the
            draw); when False, stop as soon as a draw picks an exhausted dataset.
        batching_method: ``"stratified"`` draws a dataset for every sample, so batches mix the
            datasets by weight; ``"per_stream"`` draws one for every batch, so each batch comes
            from a single dataset.
        force_override_state_dict: accept a state dict recorded with other weights or settings.
    """

    _kind = "CombinedStreamingDataset"

    def __init__(
        self,
        datasets: Sequence[StreamingDataset],
        seed: int = 42,
        weights: Sequence[float] | None = None,
        iterate_over_all: bool = True,
        batching_method: BatchingMethod = "stratified",
        force_override_state_dict: bool = False,
    ) -> None:
        super().__init__(datasets, seed, force_override_state_dict)
        if batching_method not in _METHODS:
            raise ValueError(
                f"Invalid batching method: {batching_method!r}; batching_method must be 'stratified' or 'per_stream'"
            )
        if weights is not None and iterate_over_all:
            raise ValueError(
                "When `iterate_over_all` is set to True, the weights argument shouldn't be provided: weights need "
                "iterate_over_all=False. When iterating over all datasets every sample of every dataset is "
                "yielded, and each dataset weighs its number of samples"
            )
        if weights is None:
            sizes = [d.num_samples for d in self._datasets]
            if sum(sizes) == 0:
                raise ValueError("CombinedStreamingDataset: every dataset is empty")
            raw = [float(n) for n in sizes]
        else:
            raw = [float(w) for w in weights]
            if len(raw) != len(self._datasets):
                raise ValueError(
                    f"weights has {len(raw)} values but there are {len(self._datasets)} datasets; give one weight "
                    "per dataset"
                )
            if any(not np.isfinite(w) or w < 0 for w in raw) or sum(raw) <= 0:
                raise ValueError(f"weights must be non-negative numbers that do not all equal zero, got {raw}")
        total = sum(raw)
        self.weights = [w / total for w in raw]
        self.iterate_over_all = bool(iterate_over_all)
        self.batching_method: BatchingMethod = batching_method
        self._lengths: dict[tuple[Any, ...], int] = {}

    def set_epoch(self, current_epoch: int) -> None:
        super().set_epoch(current_epoch)
        for dataset in self._datasets:  # only for their own record: a pass reads them at its own epoch
            dataset.set_epoch(current_epoch)

    # -- the plan of a run ----------------------------------------------------------------------
    def _sub_topologies(self, topology: Topology) -> list[Topology]:
        return [dataclasses.replace(topology, drop_last=d.drop_last) for d in self._datasets]

    def _segment(self, topology: Topology) -> tuple[int, list[list[Interval]], int]:
        """(segment, each sub-dataset's base, batches this rank already delivered in the segment)."""
        resume = self._resume
        if resume is None or resume["epoch"] != self.current_epoch:
            return 0, [[(0, d.num_samples)] for d in self._datasets], 0
        if resume["topology"] == topology.key:
            return resume["segment"], resume["bases"], resume["batches"]
        return resume["segment"] + 1, resume["remaining"], 0

    def _unit(self, topology: Topology) -> int:
        return topology.batch_size if self.batching_method == "per_stream" else 1

    def _rng(self, segment: int, rank: int, worker: int) -> np.random.RandomState:
        # Epoch 1, segment 0, rank 0, worker 0 is seeded like upstream's random.Random(seed).
        return python_random_state(self.seed, (self.current_epoch - 1) % 2**32, segment, rank, worker)

    def _rank_streams(
        self, topology: Topology, segment: int, bases: list[list[Interval]], rank: int
    ) -> tuple[list[list[WorkerPlan]], list[list[int]], list[int]]:
        """One rank's plans per sub-dataset per worker, stretch sizes per worker, and each worker's stream length."""
        plans = [split_base(base, sub)[rank] for base, sub in zip(bases, self._sub_topologies(topology))]
        sizes = [[p[w].num_samples for p in plans] for w in range(topology.num_workers)]
        unit = self._unit(topology)
        lengths = []
        for w, size in enumerate(sizes):
            key = (self.current_epoch, segment, topology.key, rank, w, tuple(size))
            found = self._lengths.get(key)
            if found is None:
                found = stream_length(size, self.weights, unit, self.iterate_over_all, self._rng(segment, rank, w))
                if len(self._lengths) > 256:
                    self._lengths.clear()
                self._lengths[key] = found
            lengths.append(found)
        return plans, sizes, lengths

    def _progress(self, topology: Topology) -> tuple[int, list[list[Interval]], int, list[int], int]:
        """(segment, bases, delivered, each worker's stream length, how many batches every rank delivers)."""
        segment, bases, delivered = self._segment(topology)
        lengths = self._rank_streams(topology, segment, bases, self.distributed_env.global_rank)[2]
        per_rank = sum(batch_count(n, topology.batch_size, topology.drop_last) for n in lengths)
        if not self.iterate_over_all and topology.world_size > 1:
            # Ranks stop at different points; all stop at the earliest so no collective hangs.
            for rank in range(topology.world_size):
                other = self._rank_streams(topology, segment, bases, rank)[2]
                per_rank = min(per_rank, sum(batch_count(n, topology.batch_size, topology.drop_last) for n in other))
        return segment, bases, delivered, lengths, per_rank

    def _epoch_samples(self, topology: Topology) -> int:
        # The whole segment (delivered before a resume included, as in len(loader)).
        _, _, _, lengths, per_rank = self._progress(topology)
        batches = [batch_count(n, topology.batch_size, topology.drop_last) for n in lengths]
        return _samples_at(round_robin(batches, per_rank)[0], lengths, topology.batch_size)

    def _loader_plan(self) -> LoaderPlan:
        # Stopping at its first exhausted dataset on several ranks, every rank stops together.
        topology = self._topology()
        run = self._run(topology)
        roles = [run.role(w) for w in range(topology.num_workers)]
        worker_batches = tuple(run.batches[role] - run.done[role] for role in roles)
        if self.iterate_over_all or self.distributed_env.world_size == 1:
            return LoaderPlan(worker_batches, before=sum(run.done))
        _, _, delivered, _, per_rank = self._progress(topology)
        return LoaderPlan(worker_batches, limit=max(0, per_rank - delivered), before=delivered)

    # -- iteration ------------------------------------------------------------------------------
    def _iterate(self, token: int | None, batching: Batching | None) -> Iterator[Any]:
        this_pass = self._epochs.begin(token)
        worker = WorkerEnv.detect()
        topology = self._topology(num_workers=worker.world_size)
        run = self._run(topology)
        plans, lengths = run.plans, run.lengths
        role = run.role(worker.rank)
        skip = min(run.done[role] * topology.batch_size, lengths[role])
        consumed = [0] * len(self._datasets)
        rng = self._rng(run.segment, self.distributed_env.global_rank, role)
        picks = draws(run.sizes[role], self.weights, self._unit(topology), self.iterate_over_all, rng)
        todo = _after(picks, skip, consumed)  # the draws left to this worker, and what was consumed before
        readers = self._readers()

        def stretch(d: int) -> tuple[StreamingReader, EpochOrder, list[Interval]]:
            reader = readers[d]
            order = reader.epoch_order(this_pass.epoch)
            return reader, order, skip_samples(order.read_order(plans[d][role].intervals), consumed[d])

        if batching is None:
            yield from self._samples(todo, stretch)
        else:
            yield from batching.sent(self._batches(todo, stretch, batching), worker.rank)
        self._epochs.finish(this_pass)

    def _run(self, topology: Topology) -> _RankRun:
        """This rank's part of the run: its streams, and how far each worker got before a resume."""
        segment, bases, delivered = self._segment(topology)
        plans, sizes, lengths = self._rank_streams(topology, segment, bases, self.distributed_env.global_rank)
        batches = [batch_count(n, topology.batch_size, topology.drop_last) for n in lengths]
        done, due = round_robin(batches, delivered)
        return _RankRun(segment, plans, sizes, lengths, batches, done, due)

    def _samples(self, todo: Iterator[np.ndarray], stretch: Callable[[int], Any]) -> Iterator[Any]:
        readers: list[Iterator[Any] | None] = [None] * len(self._datasets)
        for block in todo:
            for d in block.tolist():
                reader = readers[d]
                if reader is None:
                    sub, order, intervals = stretch(d)
                    reader = readers[d] = sub.read_stretch(order, intervals)
                sample = next(reader, _END)
                if sample is _END:
                    raise RuntimeError(f"CombinedStreamingDataset: datasets[{d}] ended before its planned stretch")
                yield sample

    def _batches(self, todo: Iterator[np.ndarray], stretch: Callable[[int], Any], batching: Batching) -> Iterator[Any]:
        """The batches the DataLoader would make of :meth:`_samples`: shares gathered, interleaved as drawn."""
        size, collate = batching.batch_size, batching.collate
        takers: list[Taker | None] = [None] * len(self._datasets)

        def batch_of(picks: np.ndarray) -> Any:
            shares: dict[int, list[Any]] = {}
            for d, wanted in enumerate(np.bincount(picks, minlength=len(self._datasets)).tolist()):
                if not wanted:
                    continue
                taker = takers[d]
                if taker is None:
                    sub, order, intervals = stretch(d)
                    taker = takers[d] = sub.stretch_taker(order, intervals, collate)
                shares[d], got = taker.take(wanted)
                if got < wanted:
                    raise RuntimeError(f"CombinedStreamingDataset: datasets[{d}] ended before its planned stretch")
            batch = interleave(picks, {d: concat_batches(parts) for d, parts in shares.items()})
            if batch is None:  # some share is not arrays alike: collate the samples in draw order
                samples = {d: iter([s for part in parts for s in unbatch(part)]) for d, parts in shares.items()}
                return collate([next(samples[d]) for d in picks.tolist()])
            return batching.leaving(batch)

        pending: list[np.ndarray] = []
        count = 0
        for block in todo:
            at = 0
            while at < len(block):
                step = min(size - count, len(block) - at)
                pending.append(block[at : at + step])
                at, count = at + step, count + step
                if count == size:
                    yield batch_of(np.concatenate(pending))
                    pending, count = [], 0
        if count and not batching.drop_last:
            yield batch_of(np.concatenate(pending))

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self, num_samples_yielded: int | None = None, num_workers: int = 0, batch_size: int = 1,
                   batches_delivered: int | None = None) -> dict[str, Any]:  # fmt: skip
        topology = self._topology(num_workers, batch_size)
        batches_delivered = delivered_batches(self, num_samples_yielded, topology.batch_size, batches_delivered)
        segment, bases, delivered = self._segment(topology)
        total = delivered + batches_delivered
        unit = self._unit(topology)
        # What every worker of every rank consumed of every sub-dataset (ranks move in lockstep),
        # for a resume under another topology.
        consumed: list[list[list[int]]] = [[] for _ in self._datasets]
        for rank in range(topology.world_size):
            _, sizes, lengths = self._rank_streams(topology, segment, bases, rank)
            batches = [batch_count(n, topology.batch_size, topology.drop_last) for n in lengths]
            done = round_robin(batches, min(total, sum(batches)))[0]
            per_worker = [
                count_draws(
                    size,
                    self.weights,
                    unit,
                    self.iterate_over_all,
                    self._rng(segment, rank, w),
                    min(done[w] * topology.batch_size, lengths[w]),
                )
                for w, size in enumerate(sizes)
            ]
            for d in range(len(self._datasets)):
                consumed[d].append([counts[d] for counts in per_worker])
        subs = self._sub_states(topology)
        for d, sub in enumerate(subs.values()):
            sub.update(base=[list(i) for i in bases[d]], batches=0, first_worker=0, consumed=consumed[d])
        return {
            **self._state_header(topology),
            "weights": list(self.weights),
            "iterate_over_all": self.iterate_over_all,
            "batching_method": self.batching_method,
            "segment": segment,
            "batches": total,
            "num_samples_yielded": num_samples_yielded,
            "datasets": subs,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from a state recorded by :meth:`state_dict` (under the same or another topology).

        Args:
            state_dict: A dict from :meth:`state_dict`.
        """
        fields = ("seed", "weights", "iterate_over_all", "batching_method")
        self._check_state(state_dict, fields)
        # Forced onto other draw settings, the recorded draws cannot be replayed: continue like
        # under another topology, from what each sub-dataset had not consumed.
        replayable = all(state_dict[field] == getattr(self, field) for field in fields)
        where = "CombinedStreamingDataset"
        epoch = state_int(state_dict, "epoch", where)
        self._reset_to_epoch(epoch)
        subs = state_dict.get("datasets")
        if not isinstance(subs, dict) or set(subs) != {str(d) for d in range(len(self._datasets))}:  # pyright: ignore[reportUnknownArgumentType]
            raise ValueError(f"{where}: state dict field 'datasets' must hold one state per dataset "
                             f"('0' to '{len(self._datasets) - 1}'), got {subs!r:.100}")  # fmt: skip
        bases, remaining = [], []
        for d, reader in enumerate(self._readers()):
            sub: dict[str, Any] = subs[str(d)]  # pyright: ignore[reportUnknownVariableType]
            order = reader.epoch_order(epoch)
            base = state_base(sub, "base", f"{where} datasets[{d}]", len(order))
            plans = split_base(base, state_topology(sub, "topology", f"{where} datasets[{d}]"))
            remaining.append(remaining_base(plans, sub["consumed"], order))
            bases.append(base)
        topology = state_topology(state_dict, "topology", where)
        self._resume = {
            "epoch": epoch,
            "segment": state_int(state_dict, "segment", where),
            "topology": topology.key if replayable else None,
            "batches": state_int(state_dict, "batches", where),
            "bases": bases,
            "remaining": remaining,
        }

    def _load_upstream_state(self, state: dict[str, Any]) -> None:
        """Resume from the whole state dict of an upstream LitData ``StreamingDataLoader``.

        Each sub-dataset continues with exactly what upstream had not delivered of that epoch, in
        upstream's order. Where this library's draws are upstream's (one rank, one worker, the first
        epoch, the same topology) the mix continues as upstream would; elsewhere by new draws, with a warning.
        """
        subs, yielded = state["dataset"], state["num_samples_yielded"]
        if len(subs) != len(self._datasets):
            raise ValueError(
                f"the upstream state dict was recorded on a CombinedStreamingDataset of {len(subs)} datasets but "
                f"this one has {len(self._datasets)}"
            )
        found = [adopt_upstream_order(d, subs[str(i)]) for i, d in enumerate(self._datasets)]
        topology, epoch = found[0].topology, found[0].epoch
        if topology.world_size > 1:
            raise ValueError(
                "this upstream LitData state dict of a CombinedStreamingDataset cannot be resumed: it was recorded "
                f"on {topology.world_size} ranks, and each rank's state holds only what its own workers took, so "
                "what the other ranks took is unknown here"
            )
        taken = {int(w): [int(n) for n in counts] for w, counts in yielded.items()}
        none = [0] * len(self._datasets)
        bases, remaining = [], []
        for d, reader in enumerate(self._readers()):
            length = len(reader.epoch_order(epoch))
            consumed = [[taken.get(w, none)[d] for w in range(topology.num_workers)]]
            remaining.append(remaining_base(upstream_plans(length, topology), consumed))
            bases.append([(0, length)])
        self._reset_to_epoch(epoch)
        delivered = sum(sum(counts) for counts in taken.values())
        key = topology.key
        replays = (
            key == self._topology().key
            and topology.num_workers == 1
            and epoch == 1
            and count_draws(
                [b[0][1] for b in bases], self.weights, self._unit(topology), self.iterate_over_all,
                self._rng(0, 0, 0), delivered,
            ) == taken.get(0, none)
        )  # fmt: skip
        self._resume = {
            "epoch": epoch,
            "segment": 0,
            "topology": key if replays else None,  # None: a new segment of draws on what is left
            "batches": -(-delivered // topology.batch_size),
            "bases": bases,
            "remaining": remaining,
        }
        if not replays:
            warnings.warn(
                f"resuming an upstream LitData state dict of a CombinedStreamingDataset (num_workers="
                f"{topology.num_workers}, epoch {epoch}): the rest of the epoch holds exactly the samples of each "
                "dataset upstream had not delivered, but they are mixed by new draws, not the ones upstream would "
                "have made",
                UserWarning,
                stacklevel=3,
            )


class _RankRun(NamedTuple):
    segment: int
    plans: list[list[WorkerPlan]]  # per sub-dataset, per worker
    sizes: list[list[int]]  # per worker, per sub-dataset
    lengths: list[int]  # each worker's stream length
    batches: list[int]  # each worker's batches in the segment
    done: list[int]  # of those, delivered before this run
    due: int  # the worker the interrupted run would have asked next

    def role(self, worker: int) -> int:
        """The stream torch worker ``worker`` serves (relabelled so the one due next is asked first)."""
        return (worker + self.due) % len(self.lengths)


def _after(picks: Iterator[np.ndarray], skip: int, consumed: list[int]) -> Iterator[np.ndarray]:
    """The blocks of ``picks`` after its first ``skip`` draws, counting those per dataset into ``consumed``."""
    for block in picks:
        part = block[:skip]
        if len(part):
            for d, n in enumerate(np.bincount(part, minlength=len(consumed)).tolist()):
                consumed[d] += n
            skip -= len(part)
        if len(part) < len(block):
            yield block[len(part) :]


def _samples_at(done: Sequence[int], lengths: Sequence[int], batch_size: int) -> int:
    return sum(min(n * batch_size, length) for n, length in zip(done, lengths))
