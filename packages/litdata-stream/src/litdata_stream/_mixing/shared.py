"""What CombinedStreamingDataset and ParallelStreamingDataset share.

The settings the loader passes down, their epochs (``_epochs``), the round-robin count of delivered
batches, and checking that a state dict belongs to the same sub-datasets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch.utils.data import IterableDataset

from litdata_stream._dataset import StreamingDataset, reader_of
from litdata_stream._env import DistributedEnv
from litdata_stream._epochs import Epochs
from litdata_stream._errors import NotAStreamingDatasetError
from litdata_stream._pass_plan import Topology, WorkerPlan, consumed_per_worker
from litdata_stream._protocol import EpochsOwner, PassReader
from litdata_stream._read import StreamingReader
from litdata_stream._upstream_state import is_upstream_state

__all__ = ["MixedDataset", "NotAStreamingDatasetError", "round_robin"]

STATE_VERSION = 1


def round_robin(batches: Sequence[int], delivered: int, first: int = 0) -> tuple[list[int], int]:
    """Batches each worker delivered after ``delivered`` batches in all, and the worker due next.

    The DataLoader asks its workers in turn, starting at ``first``; a worker with no batch left
    drops out of the rotation (the same count ``consumed_per_worker`` makes for sample stretches).
    """
    plans = [WorkerPlan(((0, int(count)),)) for count in batches]
    return consumed_per_worker(plans, 1, False, delivered, first)


class MixedDataset(EpochsOwner, IterableDataset):
    """The base of the datasets made of several :class:`StreamingDataset` (not public)."""

    _kind = "MixedDataset"

    def __init__(self, datasets: Sequence[StreamingDataset], seed: int, force_override_state_dict: bool) -> None:
        super().__init__()
        datasets = list(datasets)
        if not datasets:
            raise ValueError(f"{self._kind} needs at least one dataset")
        for i, dataset in enumerate(datasets):
            if not isinstance(dataset, StreamingDataset):
                raise NotAStreamingDatasetError(
                    "The provided datasets should be instances of the StreamingDataset. "
                    f"{self._kind}: datasets[{i}] is a {type(dataset).__name__}, not a StreamingDataset; "
                    "open each optimized dataset with StreamingDataset(input_dir) first"
                )
        self._datasets = datasets
        self.seed = int(seed)
        self.force_override_state_dict = bool(force_override_state_dict)
        self.distributed_env = DistributedEnv.detect()
        self._epochs = Epochs()
        self.batch_size = 1
        self.num_workers = 0
        self._drop_last: bool | None = None
        self._resume: dict[str, Any] | None = None

    # -- settings the loader passes -------------------------------------------------------------
    @property
    def drop_last(self) -> bool:
        """Whether a worker's last partial batch is dropped (by default: when every sub-dataset drops its tail)."""
        if self._drop_last is not None:
            return self._drop_last
        return all(d.drop_last for d in self._datasets)

    def set_shuffle(self, shuffle: bool) -> None:
        """Shuffle (or not) every sub-dataset from the next pass on.

        Args:
            shuffle: Whether the samples are read in a shuffled order (else in the order stored).
        """
        for dataset in self._datasets:
            dataset.set_shuffle(shuffle)

    def set_drop_last(self, drop_last: bool) -> None:
        """Drop (or not) each worker's last partial batch, in every sub-dataset too.

        Args:
            drop_last: Whether each worker's last batch, when shorter than ``batch_size``, is left out.
        """
        self._drop_last = bool(drop_last)
        for dataset in self._datasets:
            dataset.set_drop_last(drop_last)

    def set_batch_size(self, batch_size: int) -> None:
        """The batch size the plans and resume points count in, for every sub-dataset too.

        Args:
            batch_size: Samples per batch (the StreamingDataLoader sets it from its own ``batch_size``).

        Raises:
            ValueError: ``batch_size`` is not a positive int.
        """
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"{self._kind}: batch_size must be a positive int, got {batch_size!r}")
        self.batch_size = batch_size
        for dataset in self._datasets:
            dataset.set_batch_size(batch_size)

    def set_num_workers(self, num_workers: int) -> None:
        """The DataLoader workers of each rank, for every sub-dataset too.

        Args:
            num_workers: DataLoader worker processes per rank (0 or None: the main process reads).
        """
        self.num_workers = int(num_workers or 0)
        for dataset in self._datasets:
            dataset.set_num_workers(num_workers)

    # -- what the loader asks -------------------------------------------------------------------
    def get_len(self, num_workers: int, batch_size: int) -> int:
        """Samples this rank yields in the epoch (after a resume: those yielded before it and the rest).

        Args:
            num_workers: DataLoader workers per rank the samples are split over (0: the main process reads).
            batch_size: Samples per batch (each worker's last partial batch counts unless ``drop_last``).
        """
        self._follow_world()
        return self._epoch_samples(self._topology(num_workers, batch_size))

    def __len__(self) -> int:
        return self.get_len(self.num_workers, self.batch_size)

    def _follow_world(self) -> None:
        for dataset in self._datasets:
            dataset._follow_world()
        super()._follow_world()

    def _epoch_samples(self, topology: Topology) -> int:
        """Samples this rank yields in the epoch (a resumed pass yields those not yielded before it)."""
        raise NotImplementedError

    def _readers(self) -> list[StreamingReader]:
        """What this dataset reads of each sub-dataset (their stretches, orders, sizes), as they are set now."""
        return [reader_of(d) for d in self._datasets]

    @property
    def _sample_bytes(self) -> float:
        """Uncompressed bytes of one item, about (the loader sizes its messages by it)."""
        return max(r.sample_bytes for r in self._readers())

    def _gathers(self, collate: Callable[[list[Any]], Any]) -> bool:
        """Whether every sub-dataset's share of a batch made with ``collate`` is gathered as arrays."""
        return all(r.gathers(collate) for r in self._readers())

    def _gathered_sample_bytes(self, collate: Callable[[list[Any]], Any]) -> float | None:
        return self._sample_bytes if self._gathers(collate) else None

    def _in_place_chunk_bytes(self) -> int:
        """What each sub-dataset's reader maps at least, summed: a worker reads all of them."""
        return sum(PassReader(dataset).in_place_chunk_bytes() for dataset in self._datasets)

    # -- state ----------------------------------------------------------------------------------
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        raise NotImplementedError

    def _load_upstream_state(self, state: dict[str, Any]) -> None:
        """Resume from the whole state dict of an upstream LitData ``StreamingDataLoader``."""
        raise NotImplementedError

    def _load_loader_state(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("num_samples_yielded"), dict):  # upstream's: what each worker took of each dataset
            self._load_upstream_state(state)
        else:
            self.load_state_dict(state["dataset"])

    def _state_header(self, topology: Topology) -> dict[str, Any]:
        return {
            "kind": self._kind,
            "mixing_state_version": STATE_VERSION,
            "epoch": self.current_epoch,
            "seed": self.seed,
            "topology": [topology.world_size, topology.num_workers, topology.batch_size, topology.drop_last],
            "world_size": self.distributed_env.world_size,
        }

    def _sub_states(self, topology: Topology) -> dict[str, dict[str, Any]]:
        """Each sub-dataset's own record of what it is (validated again on load)."""
        return {
            str(i): d.state_dict(0, topology.num_workers, topology.batch_size, 0) for i, d in enumerate(self._datasets)
        }

    def _check_state(self, state: dict[str, Any], fields: Sequence[str]) -> None:
        """Refuse a state recorded on another kind of dataset, other sub-datasets, or other settings."""
        kind = state.get("kind")
        if kind is None and state and all(isinstance(v, dict) and is_upstream_state(v) for v in state.values()):
            raise ValueError(
                f"this is the dataset part of an upstream LitData {self._kind} state dict: give the loader's whole "
                "state dict to StreamingDataLoader.load_state_dict (upstream keeps what each worker took there)"
                + ("" if self._kind == "CombinedStreamingDataset" else "; see docs/streaming.md for what resumes")
            )
        if kind != self._kind:
            found = kind or ("StreamingDataset" if "num_samples" in state else "another dataset")
            raise ValueError(f"this state dict was recorded on a {found}, not on a {self._kind}")
        if state.get("mixing_state_version") != STATE_VERSION:
            raise ValueError(f"this {self._kind} state dict has an unknown version {state.get('mixing_state_version')}")
        recorded = state["datasets"]
        if len(recorded) != len(self._datasets):
            raise ValueError(
                f"the state dict was recorded on a {self._kind} of {len(recorded)} datasets but this one has "
                f"{len(self._datasets)}"
            )
        for i, dataset in enumerate(self._datasets):
            # The sub-dataset checks its own record (same data, seed, shuffle, ...); this wrapper keeps
            # the resume point itself, so the sub-dataset is left with none.
            forced = dataset.force_override_state_dict
            dataset.force_override_state_dict = forced or self.force_override_state_dict
            try:
                dataset.load_state_dict(recorded[str(i)])
            except ValueError as error:
                raise ValueError(f"{self._kind} datasets[{i}]: {error}") from error
            finally:
                dataset.force_override_state_dict = forced
            PassReader(dataset).reset_to_epoch(dataset.current_epoch)  # the epoch it loaded, without a resume point
        if not self.force_override_state_dict:
            for field in fields:
                if state[field] != getattr(self, field):
                    raise ValueError(
                        f"the state dict was recorded with {field}={state[field]!r} but this {self._kind} has "
                        f"{field}={getattr(self, field)!r}; use the same value or force_override_state_dict=True"
                    )
