"""What a ``StreamingDataLoader`` needs of its dataset: the one protocol it talks through.

``StreamingDataset``, ``CombinedStreamingDataset`` and ``ParallelStreamingDataset`` implement it;
the loader uses nothing else of them (no private field, no check of which methods a subclass
overrides). The members are public so the loader can use them, but they are internal to the
litdata packages: user code has no reason to call them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from litdata_stream._epochs import Epochs, LoaderPass

__all__ = ["LoaderDataset", "LoaderPlan"]


@dataclass(frozen=True)
class LoaderPlan:
    """This rank's share of the loader's pass, as the dataset plans it.

    Attributes:
        worker_batches: the batches each DataLoader worker of this rank delivers (by torch
            worker id), or None when the dataset never ends.
        limit: stop after this many batches, so that every rank delivers as many (None: run to the end).
    """

    worker_batches: tuple[int, ...] | None
    limit: int | None = None

    @property
    def batches(self) -> int | None:
        """The batches this rank's loader delivers in the pass (None: endless)."""
        if self.worker_batches is None:
            return None
        total = sum(self.worker_batches)
        return total if self.limit is None else min(total, self.limit)


@runtime_checkable
class LoaderDataset(Protocol):
    """A dataset a ``StreamingDataLoader`` can read, resume, and have its workers batch."""

    # Whether ``__iter__`` makes the batches itself when the loader hands it a pass with a
    # ``Batching``. A subclass defining its own ``__iter__`` yields samples, so it is False there.
    batches_in_workers: ClassVar[bool]

    @property
    def batch_size(self) -> int:
        """The batch size the loader set."""
        ...

    @property
    def drop_last(self) -> bool:
        """Whether each worker's last partial batch is dropped."""
        ...

    @property
    def epochs(self) -> Epochs:
        """The record of which epoch a pass reads: the loader begins and finishes its passes on it."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """One pass over the dataset: its samples, or its batches when handed a pass with a batching."""
        ...

    def set_shuffle(self, shuffle: bool) -> None:
        """Shuffle (or not) from the next pass on."""
        ...

    def set_drop_last(self, drop_last: bool) -> None:
        """Drop (or not) each worker's last partial batch."""
        ...

    def set_batch_size(self, batch_size: int) -> None:
        """The batch size the plans and resume points count in."""
        ...

    def set_num_workers(self, num_workers: int) -> None:
        """The DataLoader workers of each rank (0: the main process reads)."""
        ...

    def loader_plan(self) -> LoaderPlan:
        """This rank's share of the pass of the current epoch (the rest of it after a resume)."""
        ...

    def gathered_sample_bytes(self, collate: Callable[[list[Any]], Any]) -> float | None:
        """Bytes of one sample, about, when batches made with ``collate`` are gathered as arrays.

        None when they are not (the loader sizes the messages of its workers by it).
        """
        ...

    def hand_pass(self, handed: LoaderPass | None) -> None:
        """Make the next ``iter()`` of this dataset join the loader's pass ``handed``.

        The ``iter()`` is in the loader's process, or in a worker that takes its copy now; ``handed`` is
        None when that pass is over.
        """
        ...

    def reset_to_epoch(self, epoch: int) -> None:
        """The next pass reads ``epoch`` from its start, whatever state dict was loaded."""
        ...

    def state_dict(self, num_samples_yielded: int = 0, num_workers: int = 0, batch_size: int = 1,
                   batches_delivered: int | None = None) -> dict[str, Any]:  # fmt: skip
        """The resume point after this rank's loader delivered ``batches_delivered`` batches."""
        ...

    def load_loader_state(self, state: dict[str, Any]) -> None:
        """Resume from a ``StreamingDataLoader``'s whole state dict (this library's or upstream LitData's)."""
        ...
