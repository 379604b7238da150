"""What a ``StreamingDataLoader`` needs of its dataset, and the one value it gets it through.

The datasets show their users only their user API (upstream LitData's, plus what docs/ promise).
What the loader needs of them (the plan of a pass, resuming from its whole state dict, the epoch
record, one pass of batches) it gets from a :class:`PassReader`: a frozen value holding the
dataset, the pass's token and how its workers batch. torch pickles it into the DataLoader workers
as their dataset, so nothing is set on the shared dataset and cleared after the workers start.
A dataset class implements the reader's side through the private hooks of :class:`EpochsOwner`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from torch.utils.data import IterableDataset

from litdata_stream._collate import Batching
from litdata_stream._env import DistributedEnv, logger, notice_drop_last
from litdata_stream._epochs import Epochs
from litdata_stream._pass_plan import Topology, batch_count, delivered_before

__all__ = ["EpochsOwner", "LoaderDataset", "LoaderPlan", "PassReader", "SizedPass", "delivered_batches"]


@dataclass(frozen=True)
class LoaderPlan:
    """This rank's share of the loader's pass, as the dataset plans it.

    Attributes:
        worker_batches: the batches each DataLoader worker of this rank delivers (by torch
            worker id), or None when the dataset never ends.
        limit: stop after this many batches, so that every rank delivers as many (None: run to the end).
        before: the batches this rank's loader delivered of the same epoch before a loaded state dict
            (0 unless the pass resumes one): ``len(loader)`` counts them, as upstream's and
            torchdata's loaders do, and Lightning counts its restored batches against that length.
    """

    worker_batches: tuple[int, ...] | None
    limit: int | None = None
    before: int = 0

    @property
    def batches(self) -> int | None:
        """The batches this rank's loader delivers in the pass (None: endless)."""
        if self.worker_batches is None:
            return None
        total = sum(self.worker_batches)
        return total if self.limit is None else min(total, self.limit)

    @property
    def epoch_batches(self) -> int | None:
        """The batches of this rank's whole epoch: those of a resumed pass and those delivered before it."""
        batches = self.batches
        return None if batches is None else self.before + batches


@runtime_checkable
class LoaderDataset(Protocol):
    """The user API of a dataset that a ``StreamingDataLoader`` uses (upstream LitData's; see StreamingDataset)."""

    @property
    def batch_size(self) -> int: ...

    @property
    def drop_last(self) -> bool: ...

    def set_shuffle(self, shuffle: bool) -> None: ...

    def set_drop_last(self, drop_last: bool) -> None: ...

    def set_batch_size(self, batch_size: int) -> None: ...

    def set_num_workers(self, num_workers: int) -> None: ...

    def state_dict(self, num_samples_yielded: int | None = None, num_workers: int = 0, batch_size: int = 1,
                   batches_delivered: int | None = None) -> dict[str, Any]: ...  # fmt: skip


def delivered_batches(owner: EpochsOwner, num_samples_yielded: int | None, batch_size: int, batches: int | None) -> int:
    """The batches a loader delivered, as a dataset's ``state_dict`` is told them.

    Without either count the state is exact only where no pass is under way (nothing of the next
    pass was delivered); within a pass, or in a DataLoader worker, the dataset alone cannot tell how
    far the loader got, so that raises a TypeError naming the loader that records it.
    """
    from torch.utils.data import get_worker_info

    if batches is not None:
        return batches
    if num_samples_yielded is not None:
        return batch_count(num_samples_yielded, batch_size)
    if get_worker_info() is None and owner._epochs.pending is not None:
        return 0  # no pass under way: the state is where the next one starts
    kind = type(owner).__name__
    raise TypeError(
        f"{kind}.state_dict() needs what the loader delivered (num_samples_yielded, num_workers, batch_size) while "
        "a pass is under way: the dataset alone cannot tell how far the DataLoader and its workers got, and a "
        "state without it would resume at the start of the epoch and repeat samples. torchdata's "
        "StatefulDataLoader calls it so: use litdata's StreamingDataLoader instead, whose state_dict() / "
        "load_state_dict() resume exactly (Lightning saves and restores it in its checkpoints)"
    )


# The pass a subclass's own ``__iter__`` joins when a PassReader runs it: its call of the base
# ``__iter__`` takes it (once), in a context of the pass's own (``PassReader._through_own_iter``).
_JOINING: contextvars.ContextVar[tuple[int | None, Batching | None] | None] = contextvars.ContextVar(
    "litdata_stream_pass", default=None
)


class EpochsOwner:
    """A dataset that owns its epochs: ``current_epoch``, ``set_epoch``, and ``__iter__`` (one pass).

    The private hooks are what its :class:`PassReader` asks for the loader.
    """

    _epochs: Epochs
    _resume: dict[str, Any] | None  # where a pass of the loaded state's epoch continues from
    distributed_env: DistributedEnv  # the world the passes are split over
    num_workers: int
    batch_size: int
    # Whether ``__iter__`` makes the batches when the loader asks (docs/streaming.md, *Subclasses*): a
    # subclass defining its own ``__iter__`` yields samples for the DataLoader to batch, unless it sets it.
    batches_in_workers: ClassVar[bool] = True
    # Whether ``len(iter(dataset))`` works, as for upstream's StreamingDataset (not its mixing datasets).
    _sized_passes: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__iter__" in vars(cls) and "batches_in_workers" not in vars(cls):
            cls.batches_in_workers = False

    @property
    def current_epoch(self) -> int:
        """The epoch of the pass in progress, or else of the next pass."""
        return self._epochs.current

    @current_epoch.setter
    def current_epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def set_epoch(self, current_epoch: int) -> None:
        """Make the next pass read epoch ``current_epoch``.

        Ignored while a loaded state dict waits for its pass (as upstream does): a training loop
        that calls ``set_epoch`` before every epoch still resumes where the state dict says.

        Args:
            current_epoch: The epoch the next pass reads (its shuffled order depends on it).
        """
        resume = self._resume
        if resume is not None and self._epochs.pending == resume["epoch"]:
            return
        self._reset_to_epoch(int(current_epoch))

    def _before(self) -> tuple[int, int]:
        """(batches, samples) this rank delivered of the current epoch before the loaded state dict (else 0, 0)."""
        return delivered_before(self._resume, self.current_epoch, self.distributed_env.global_rank)

    def _reset_to_epoch(self, epoch: int) -> None:
        """The next pass reads ``epoch`` from its start, whatever state dict was loaded."""
        self._resume = None
        self._epochs.set(epoch)

    def _topology(self, num_workers: int | None = None, batch_size: int | None = None) -> Topology:
        workers = self.num_workers if num_workers is None else num_workers
        return Topology(
            self.distributed_env.world_size,
            max(1, workers or 1),
            max(1, self.batch_size if batch_size is None else batch_size),
            self.drop_last,
        )

    def _follow_world(self) -> None:
        """Split the next pass over the world this process is in now, if it changed since the dataset was made.

        A dataset made before a launcher (Lightning's ``Trainer``) set up torch.distributed saw a world
        of one. A DataLoader worker keeps the world it was handed: it cannot see torch.distributed.
        """
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None:
            return
        now = DistributedEnv.detect()
        if now != self.distributed_env:
            before, self.distributed_env = self.distributed_env, now
            logger.info(
                "%s was made in a world of %d process(es) and is now read by rank %d of %d: its epochs are split "
                "over %d (drop_last=%s)",
                type(self).__name__, before.world_size, now.global_rank, now.world_size, now.world_size, self.drop_last,
            )  # fmt: skip
            notice_drop_last(self.drop_last, now.world_size)

    @property
    def drop_last(self) -> bool:
        """Whether each worker's last partial batch is dropped."""
        raise NotImplementedError

    def state_dict(self, num_samples_yielded: int | None = None, num_workers: int = 0, batch_size: int = 1,
                   batches_delivered: int | None = None) -> dict[str, Any]:  # fmt: skip
        """The resume point after this rank's loader delivered ``batches_delivered`` batches.

        Args:
            num_samples_yielded: Samples the loader delivered in this pass; upstream LitData's argument, used
                only when ``batches_delivered`` is None.
            num_workers: DataLoader workers per rank of the run being recorded (0: the main process reads).
            batch_size: The batch size of that run.
            batches_delivered: Batches this rank's loader delivered in its pass of the current epoch.

        Returns:
            A dict of plain values (ints, lists, strings) to save and give to :meth:`load_state_dict`.
        """
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        joining = _JOINING.get()
        if joining is not None:
            _JOINING.set(None)  # taken once: another ``iter(self)`` inside the subclass's pass is a pass of its own
            return self._iterate(*joining)
        self._follow_world()
        if self._sized_passes:
            return SizedPass(self, self._iterate(None, None))
        return self._iterate(None, None)

    # -- the hooks its PassReader calls -----------------------------------------------------------
    def _iterate(self, token: int | None, batching: Batching | None) -> Iterator[Any]:
        """This process's share of a pass: its samples, or its batches when ``batching`` is given.

        ``token`` names the pass to join (a StreamingDataLoader's; None: a pass of its own).
        """
        raise NotImplementedError

    def _loader_plan(self) -> LoaderPlan:
        """This rank's share of the pass of the current epoch (the rest of it after a resume, and what came before)."""
        raise NotImplementedError

    def _gathered_sample_bytes(self, collate: Callable[[list[Any]], Any]) -> float | None:
        """Bytes of one sample, about, when batches made with ``collate`` are gathered as arrays, else None."""
        raise NotImplementedError

    def _load_loader_state(self, state: dict[str, Any]) -> None:
        """Resume from a ``StreamingDataLoader``'s whole state dict (this library's or upstream LitData's)."""
        raise NotImplementedError

    def _in_place_chunk_bytes(self) -> int:
        """Bytes one reader maps at least while it reads chunks in place (0: it reads none in place)."""
        return 0


@dataclass(frozen=True, eq=False)
class PassReader(IterableDataset[Any]):
    """A dataset as a ``StreamingDataLoader`` sees it for one pass: the loader protocol.

    Iterating it is the dataset's share of the pass in this process: its samples, or with ``batching``
    its batches. ``token`` names the pass to join (in a worker, what it derives its token from; None:
    a pass of its own).
    """

    dataset: EpochsOwner
    token: int | None = None
    batching: Batching | None = None

    @property
    def batches_in_workers(self) -> bool:
        """Whether iterating makes the batches (else it yields samples; see docs/streaming.md)."""
        return type(self.dataset).batches_in_workers

    @property
    def epochs(self) -> Epochs:
        """The record of which epoch a pass reads: the loader begins and finishes its passes on it."""
        return self.dataset._epochs

    def plan(self) -> LoaderPlan:
        """This rank's share of the pass of the current epoch (the rest of it after a resume)."""
        self.dataset._follow_world()
        return self.dataset._loader_plan()

    def gathered_sample_bytes(self, collate: Callable[[list[Any]], Any]) -> float | None:
        """Bytes of one sample, about, when batches made with ``collate`` are gathered as arrays, else None."""
        return self.dataset._gathered_sample_bytes(collate)

    def reset_to_epoch(self, epoch: int) -> None:
        """The next pass reads ``epoch`` from its start, whatever state dict was loaded."""
        self.dataset._reset_to_epoch(epoch)

    def load_loader_state(self, state: dict[str, Any]) -> None:
        """Resume from a ``StreamingDataLoader``'s whole state dict (this library's or upstream LitData's)."""
        self.dataset._load_loader_state(state)

    def in_place_chunk_bytes(self) -> int:
        """Bytes a reader maps at least: its largest chunk read in place (0 when all come through the cache)."""
        return self.dataset._in_place_chunk_bytes()

    def __iter__(self) -> Iterator[Any]:
        if type(self.dataset).__iter__ is EpochsOwner.__iter__:
            return self.dataset._iterate(self.token, self.batching)
        return self._through_own_iter()

    def _through_own_iter(self) -> Iterator[Any]:
        """The pass through a subclass's own ``__iter__``, each step in a context holding this pass."""
        context = contextvars.copy_context()
        context.run(_JOINING.set, (self.token, self.batching))
        steps = context.run(iter, self.dataset)
        try:
            while True:
                try:
                    item = context.run(next, steps)
                except StopIteration:
                    return
                yield item
        finally:
            close = getattr(steps, "close", None)
            if close is not None:
                context.run(close)


class SizedPass(Iterator[Any]):
    """A pass over a dataset that also answers ``len()`` (the dataset's), as upstream's does."""

    __slots__ = ("_dataset", "_samples")

    def __init__(self, dataset: Any, samples: Iterator[Any]) -> None:
        self._dataset = dataset
        self._samples = samples

    def __iter__(self) -> SizedPass:
        return self

    def __next__(self) -> Any:
        return next(self._samples)

    def __len__(self) -> int:
        return len(self._dataset)

    def close(self) -> None:
        """Break the pass off here (what ``del`` or the end of a ``for`` with ``break`` does too)."""
        close = getattr(self._samples, "close", None)
        if close is not None:
            close()
