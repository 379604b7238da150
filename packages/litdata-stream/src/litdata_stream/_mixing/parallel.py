"""``ParallelStreamingDataset``: one sample from every dataset at each step, cycled or not.

The tuples of an epoch are numbered ``0 .. G-1`` (``G`` = the shortest dataset, or ``length`` per
rank when cycling). Tuple ``p`` takes from every sub-dataset the sample at position ``P = offset + p``
of its endless sequence (its epoch 1 order, then epoch 2's, ...); cycling with ``resume=True``, an
epoch's offset is where the previous one ended. The tuple numbers are split, counted and resumed as
a :class:`StreamingDataset`'s samples are (``_pass_plan``). An endless dataset gives worker ``g`` of
``K`` the batches ``g, g + K, ...`` and resumes under the same topology only. The generators handed
to ``transform`` are seeded for every tuple from ``(seed, P)``, so a resume or another number of
workers transforms alike.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import math
import random
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from litdata_stream._collate import Batching, concat_batches, unbatch
from litdata_stream._dataset import StreamingDataset
from litdata_stream._env import WorkerEnv
from litdata_stream._mixing.shared import MixedDataset
from litdata_stream._pass_plan import (
    EpochOrder,
    Interval,
    Topology,
    WorkerPlan,
    batches_left,
    rank_shares,
    rebase_resume,
    skip_samples,
)
from litdata_stream._protocol import LoaderPlan, delivered_batches
from litdata_stream._read import StreamingReader
from litdata_stream._state_fields import state_base, state_int, state_topology
from litdata_stream._takers import Taker

__all__ = ["ParallelStreamingDataset"]

_END = object()


def _wants_generators(fn: Callable[..., Any]) -> bool:
    """Whether ``transform`` takes the generators as a second argument (it must take 1 or 2)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: give it the samples only
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not positional or len(required) > 2:
        raise ValueError(
            f"transform function must take 1 or 2 arguments (the samples and optionally the random "
            f"generators), but it takes {len(positional)} positional arguments ({len(required)} required)"
        )
    return len(positional) >= 2


class _SeededGenerators:
    """The ``rngs`` dict handed to ``transform``, reseeded for every tuple.

    Reseeding is cheap: one seed call each for random and torch, a state copy and an ``advance`` for numpy.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._numpy_bits = np.random.PCG64([seed, 0x5EED])
        self._numpy_start = self._numpy_bits.state
        self.rngs: dict[str, Any] = {
            "random": random.Random(),  # seeded for reproducible augmentation
            "numpy": np.random.Generator(self._numpy_bits),
            "torch": torch.Generator(),
        }

    def at(self, lane: int, position: int) -> dict[str, Any]:
        digest = hashlib.blake2b(f"{self.seed}:{lane}:{position}".encode(), digest_size=8).digest()
        key = int.from_bytes(digest, "little") >> 1
        self.rngs["random"].seed(key)
        self.rngs["torch"].manual_seed(key)
        self._numpy_bits.state = self._numpy_start
        self._numpy_bits.advance(key << 64)  # disjoint streams: a tuple never draws 2**64 numbers
        return self.rngs


class ParallelStreamingDataset(MixedDataset):
    """Stream several :class:`StreamingDataset` side by side: each item is a tuple with one sample of each.

    Args:
        datasets: the datasets to read in parallel.
        length: ``None`` to stop with the shortest dataset; an int to yield that many tuples per
            epoch (per rank), cycling the datasets as needed; ``float("inf")`` to never stop.
        force_override_state_dict: accept a state dict recorded with other settings.
        transform: called on each tuple as ``transform(samples)``, or ``transform(samples, rngs)``
            where ``rngs`` holds seeded ``"random"``, ``"numpy"`` and ``"torch"`` generators.
        seed: seeds the generators given to ``transform``.
        resume: when cycling, start each epoch where the previous one ended (True) or yield the
            same tuples every epoch (False).
        reset_rngs: give ``transform`` the same generators at the same place of every epoch.
    """

    _kind = "ParallelStreamingDataset"

    def __init__(
        self,
        datasets: Sequence[StreamingDataset],
        length: int | float | None = None,
        force_override_state_dict: bool = False,
        transform: Callable[..., Any] | None = None,
        seed: int = 42,
        resume: bool = True,
        reset_rngs: bool = False,
    ) -> None:
        super().__init__(datasets, seed, force_override_state_dict)
        if length is not None and not (
            (isinstance(length, int) and not isinstance(length, bool) and length >= 0) or length == math.inf
        ):
            raise ValueError(
                f"`length` must be `None`, an integer, or `float('inf')`: length must be None, a non-negative int "
                f"or float('inf'), got {length!r}"
            )
        if length is not None and any(d.num_samples == 0 for d in self._datasets):
            empty = [i for i, d in enumerate(self._datasets) if d.num_samples == 0]
            raise ValueError(f"cannot cycle empty datasets (datasets{empty} have no samples); use length=None")
        self._transform_args = 0
        if transform is not None:
            if not callable(transform):
                raise TypeError(f"transform must be callable, got {transform!r}")
            self._transform_args = 2 if _wants_generators(transform) else 1
        self.length = length
        self.transform = transform
        self.resume = bool(resume)
        self.reset_rngs = bool(reset_rngs)
        self._anchor: tuple[int, int, int] | None = None  # (epoch, its offset, its number of tuples)

    @property
    def _infinite(self) -> bool:
        return self.length == math.inf

    @property
    def _cycling(self) -> bool:
        return self.length is not None

    def is_cycling(self) -> bool:
        """Whether the sub-datasets are cycled to ``length`` tuples, rather than read up to the shortest."""
        return self._cycling

    def is_infinite(self) -> bool:
        """Whether the dataset is endless (``length=float("inf")``)."""
        return self._infinite

    # -- the tuples of an epoch -----------------------------------------------------------------
    def _epoch_length(self) -> int:
        """``G``: the tuples of one epoch over all ranks."""
        if self.length is None:
            return min(d.num_samples for d in self._datasets)
        return int(self.length) * self.distributed_env.world_size

    def _offset(self, epoch: int) -> int:
        """Where epoch ``epoch`` starts in the datasets' endless sequences."""
        if not (self._cycling and self.resume) or self._infinite:
            return 0
        anchor = self._anchor
        if anchor is None or epoch < anchor[0]:
            return (epoch - 1) * self._epoch_length()
        start_epoch, start, count = anchor
        if epoch == start_epoch:
            return start
        return start + count + (epoch - start_epoch - 1) * self._epoch_length()

    def _lane(self) -> int:
        """Tells apart epochs whose positions ``P`` would otherwise coincide (for the generators)."""
        if self.reset_rngs or (self._cycling and self.resume and not self._infinite):
            return 0
        return self.current_epoch

    def _spans(self, size: int, position: int, end: int) -> Iterator[tuple[int, int, int]]:
        """Endless positions ``position .. end - 1`` of a sub-dataset of ``size`` samples: (epoch, start, count)."""
        while position < end:
            if self.length is None:
                epoch, within = self.current_epoch, position
            else:
                first = self.current_epoch if self._infinite else 1
                epoch, within = first + position // size, position % size
            count = min(end - position, size - within)
            yield epoch, within, count
            position += count

    # -- the plan of a run (finite epochs) ------------------------------------------------------
    def _run_start(self, topology: Topology) -> tuple[list[Interval], int, int]:
        resume = self._resume
        if resume is None or resume["epoch"] != self.current_epoch:
            return [(0, self._epoch_length())], 0, 0
        if resume["topology"] == topology.key:
            return resume["base"], resume["first_worker"], resume["batches"]
        if self._infinite:
            raise ValueError(_endless_topology_error(resume["topology"], topology))
        return rebase_resume(resume), 0, 0

    def _rank_plans(self, topology: Topology) -> list[tuple[WorkerPlan, int]]:
        return rank_shares(self._run_start(topology), topology, self.distributed_env.global_rank)

    def _epoch_samples(self, topology: Topology) -> int:
        if self._infinite:
            raise TypeError("an endless ParallelStreamingDataset (length=float('inf')) has no len()")
        return self._before()[1] + sum(plan.num_samples - done for plan, done in self._rank_plans(topology))

    def _loader_plan(self) -> LoaderPlan:
        if self._infinite:
            return LoaderPlan(None)
        topology = self._topology()
        left = tuple(batches_left(plan, done, topology) for plan, done in self._rank_plans(topology))
        return LoaderPlan(left, before=self._before()[0])

    # -- iteration ------------------------------------------------------------------------------
    @property
    def _sample_bytes(self) -> float:
        return sum(r.sample_bytes for r in self._readers())

    def _iterate(self, token: int | None, batching: Batching | None) -> Iterator[Any]:
        run = self._epochs.begin(token)
        worker = WorkerEnv.detect()
        topology = self._topology(num_workers=worker.world_size)
        if self._infinite:
            stretches: Iterator[Interval] = self._endless_stretches(topology, worker.rank)
        else:
            plan, done = self._rank_plans(topology)[worker.rank]
            stretches = iter(skip_samples(plan.intervals, done))
        offset = self._offset(self.current_epoch)
        if batching is None:
            yield from self._tuples(stretches, offset)
        elif self.transform is None and self._gathers(batching.collate):
            yield from batching.sent(self._gathered(stretches, offset, batching), worker.rank)
        else:
            yield from batching.sent(_grouped(self._tuples(stretches, offset), batching), worker.rank)
        self._epochs.finish(run)

    def _tuples(self, stretches: Iterator[Interval], offset: int) -> Iterator[Any]:
        """The (transformed) tuples at ``stretches`` of the epoch starting at ``offset``."""
        lane = self._lane()
        generators = _SeededGenerators(self.seed) if self._transform_args == 2 else None
        orders: list[dict[int, EpochOrder]] = [{} for _ in self._datasets]
        subs = self._readers()
        for start, end in stretches:
            readers = [self._positions(d, sub, offset + start, offset + end, orders[d]) for d, sub in enumerate(subs)]
            for p in range(start, end):
                samples = tuple(_next(reader, d) for d, reader in enumerate(readers))
                if self.transform is None:
                    yield samples
                elif generators is None:
                    yield self.transform(samples)
                else:
                    yield self.transform(samples, generators.at(lane, p if self.reset_rngs else offset + p))

    def _gathered(self, stretches: Iterator[Interval], offset: int, batching: Batching) -> Iterator[Any]:
        """The batches of :meth:`_tuples` (without a transform): the list of each sub-dataset's gathered share."""
        size = batching.batch_size
        takers = [_SpanTaker(self, reader, offset, batching.collate) for reader in self._readers()]

        def batch_of(count: int) -> Any:
            shares = []
            for d, taker in enumerate(takers):
                parts, got = taker.take(count)
                if got < count:
                    raise RuntimeError(f"ParallelStreamingDataset: datasets[{d}] ended before its planned stretch")
                shares.append(parts)
            joined = [concat_batches(parts) for parts in shares]
            if any(batch is None for batch in joined):  # some share is not arrays alike: collate the tuples
                columns = [[sample for part in parts for sample in unbatch(part)] for parts in shares]
                return batching.collate(list(zip(*columns)))
            return batching.leaving(joined)

        pending = 0
        for start, end in stretches:
            for taker in takers:
                taker.add(start, end)
            pending += end - start
            while pending >= size:
                yield batch_of(size)
                pending -= size
        if pending and not batching.drop_last:
            yield batch_of(pending)

    def _positions(
        self, d: int, dataset: StreamingReader, start: int, end: int, orders: dict[int, EpochOrder]
    ) -> Iterator[Any]:
        """Sub-dataset ``d``'s samples (read by ``dataset``) at endless positions ``start .. end - 1``."""
        for epoch, within, count in self._spans(dataset.num_samples, start, end):
            order = orders.get(epoch)
            if order is None:
                orders.clear()  # one epoch order at a time: cycling moves forward
                order = orders[epoch] = dataset.epoch_order(epoch)
            yield from dataset.read_stretch(order, [(within, within + count)])

    def _endless_stretches(self, topology: Topology, worker: int) -> Iterator[Interval]:
        """This worker's batches of the endless sequence: batch ``g + i * K`` for global worker ``g`` of ``K``."""
        resume = self._resume
        delivered = 0
        if resume is not None and resume["epoch"] == self.current_epoch:
            self._run_start(topology)  # refuses another topology
            delivered = resume["batches"]
        workers, size = topology.num_workers, topology.batch_size
        due = delivered % workers
        role = (worker + due) % workers
        index = delivered // workers + (1 if role < delivered % workers else 0)
        everyone = topology.world_size * workers
        mine = self.distributed_env.global_rank * workers + role
        while True:
            start = (index * everyone + mine) * size
            yield start, start + size
            index += 1

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self, num_samples_yielded: int | None = None, num_workers: int = 0, batch_size: int = 1,
                   batches_delivered: int | None = None) -> dict[str, Any]:  # fmt: skip
        topology = self._topology(num_workers, batch_size)
        batches_delivered = delivered_batches(self, num_samples_yielded, topology.batch_size, batches_delivered)
        if self._infinite:
            resume = self._resume
            base: list[Interval] = []
            first = 0
            delivered = resume["batches"] if resume is not None and resume["epoch"] == self.current_epoch else 0
        else:
            base, first, delivered = self._run_start(topology)
        return {
            **self._state_header(topology),
            "length": "inf" if self._infinite else self.length,
            "resume": self.resume,
            "reset_rngs": self.reset_rngs,
            "offset": self._offset(self.current_epoch),
            "epoch_length": 0 if self._infinite else self._epoch_length(),
            "base": [list(i) for i in base],
            "batches": delivered + batches_delivered,
            "first_worker": first,
            "num_samples_yielded": num_samples_yielded,
            "datasets": self._sub_states(topology),
        }

    @property
    def _length_key(self) -> Any:
        return "inf" if self._infinite else self.length

    def _load_upstream_state(self, state: dict[str, Any]) -> None:
        """Refuse an upstream LitData loader state dict: its resume point cannot be rebuilt here."""
        raise ValueError(
            "an upstream LitData state dict of a ParallelStreamingDataset cannot be resumed here: upstream counts "
            "each worker's samples and cycles in its own order of the datasets, which this library does not "
            "rebuild; finish the epoch with upstream LitData, then switch (see docs/streaming.md)"
        )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from a state recorded by :meth:`state_dict`.

        Args:
            state_dict: A dict from :meth:`state_dict`.
        """
        self._check_state(state_dict, ("seed", "resume", "reset_rngs"))
        if state_dict["length"] != self._length_key and not self.force_override_state_dict:
            raise ValueError(
                f"the state dict was recorded with length={state_dict['length']!r} but this ParallelStreamingDataset "
                f"has length={self._length_key!r}; use the same value or force_override_state_dict=True"
            )
        where = "ParallelStreamingDataset"
        topology = state_topology(state_dict, "topology", where)
        if self._infinite and topology.key != self._topology().key:
            raise ValueError(_endless_topology_error(state_dict["topology"], self._topology()))
        epoch = state_int(state_dict, "epoch", where)
        length = state_int(state_dict, "epoch_length", where)
        self._reset_to_epoch(epoch)
        self._anchor = (epoch, state_int(state_dict, "offset", where), length)
        self._resume = {
            "epoch": epoch,
            "base": state_base(state_dict, "base", where, length),
            "topology": topology.key,
            # An endless dataset counts its batches on without end (its epoch_length is 0).
            "batches": state_int(state_dict, "batches", where, high=(1 << 63) - 1 if self._infinite else length),
            "first_worker": state_int(state_dict, "first_worker", where, high=topology.num_workers - 1),
        }


class _SpanTaker:
    """Takes a sub-dataset's samples at the endless positions added to it, a batch's share at a time."""

    def __init__(self, parallel: ParallelStreamingDataset, reader: StreamingReader, offset: int, collate: Any) -> None:
        self._parallel, self._offset, self._collate = parallel, offset, collate
        self._sub = reader
        self._spans: deque[tuple[int, int, int]] = deque()  # (epoch, first position in its order, count)
        self._taker: Taker | None = None
        self._order: EpochOrder | None = None

    def add(self, start: int, end: int) -> None:
        self._spans.extend(self._parallel._spans(self._sub.num_samples, self._offset + start, self._offset + end))

    def take(self, count: int) -> tuple[list[Any], int]:
        parts: list[Any] = []
        got = 0
        while got < count:
            if self._taker is not None:
                more, n = self._taker.take(count - got)
                parts.extend(more)
                got += n
                if got == count:
                    break
            if not self._spans:
                break
            epoch, within, length = self._spans.popleft()
            if self._order is None or self._order.epoch != epoch:
                self._order = self._sub.epoch_order(epoch)
            self._taker = self._sub.stretch_taker(self._order, [(within, within + length)], self._collate)
        return parts, got


def _grouped(samples: Iterator[Any], batching: Batching) -> Iterator[Any]:
    """``samples`` collated ``batch_size`` at a time (the last batch shorter unless ``drop_last``)."""
    while batch := list(itertools.islice(samples, batching.batch_size)):
        if len(batch) < batching.batch_size and batching.drop_last:
            return
        yield batching.collate(batch)


def _next(reader: Iterator[Any], d: int) -> Any:
    sample = next(reader, _END)
    if sample is _END:
        raise RuntimeError(f"ParallelStreamingDataset: datasets[{d}] ended before its planned stretch")
    return sample


def _endless_topology_error(recorded: Sequence[Any], topology: Topology) -> str:
    return (
        "an endless ParallelStreamingDataset resumes only with the topology it was recorded with: (world size, "
        f"workers, batch size, drop_last) = {tuple(recorded)}, not {topology.key}"
    )
