"""``StreamingDataLoader``: a torch DataLoader that knows where it is in the epoch.

The dataset owns its epochs and where a resumed pass continues from (``_epochs``); each
iteration of the loader is one pass over it, which its workers join. The DataLoader hands out
batches round-robin over its workers, in order, so counting the batches it delivered is enough
to know what every worker consumed (``_pass_plan``). ``state_dict`` records that count with the
dataset's state; ``load_state_dict`` gives that state back to the dataset, whose next pass
continues from there.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, cast

from torch.utils.data import DataLoader, IterableDataset

from litdata_io import start_forkserver
from litdata_io.internal import ActivityBoard, attach_activity, probe
from litdata_stream._collate import ArrayBatch, Batching, CollatedInDataset, litdata_collate
from litdata_stream._env import DistributedEnv
from litdata_stream._epochs import new_token, worker_token
from litdata_stream._errors import NotAStreamingDatasetError
from litdata_stream._profiling import (
    ProfiledCollate,
    ProfiledWorkerInit,
    main_profiler,
    profile_settings,
)
from litdata_stream._protocol import EpochsOwner, LoaderDataset, PassReader
from litdata_stream._sources.readahead import capped_workers
from litdata_stream._watchdog import (
    LoaderStats,
    PassTimes,
    Watchdog,
    WatchedWorkerInit,
    batch_samples,
    watchdog_seconds,
    worker_order,
)

__all__ = ["StreamingDataLoader"]


class StreamingDataLoader(DataLoader):
    """A DataLoader over a :class:`StreamingDataset` (or a Combined / Parallel one).

    Its ``state_dict`` is exact and resumable.

    Args:
        dataset: the dataset to iterate.
        batch_size: samples per batch.
        num_workers: worker processes (0 reads in the main process).
        shuffle: overrides the dataset's ``shuffle`` when given.
        drop_last: overrides the dataset's ``drop_last`` when given.
        collate_fn: how samples become a batch (default :func:`litdata_collate`).
        profile_batches: record a viztracer trace (``result.json``) of worker 0 for this many
            batches, or ``True`` for its whole life (needs ``num_workers >= 1`` and viztracer).
        profile_skip_batches: batches worker 0 fetches before the trace starts.
        profile_dir: where profiles are written (default: the current directory).
        profile_cprofile: write cProfile stats of the main process and worker 0
            (``cprofile_main.prof`` / ``cprofile_worker0.prof`` and ``.txt`` summaries).
        watchdog_s: when the loop has waited this many seconds for a batch, warn
            (:class:`LoaderStallWarning`) and trace where every worker is, again every
            ``watchdog_s`` while it lasts (time between batches is not counted). Default:
            ``LITDATA_WATCHDOG_S``, else 300; 0 turns the watchdog off.
        **kwargs: anything else a torch ``DataLoader`` takes (``persistent_workers``,
            ``prefetch_factor``, ``multiprocessing_context``, ``pin_memory``, ...).
    """

    def __init__(
        self,
        dataset: LoaderDataset,
        *args: Any,
        batch_size: int = 1,
        num_workers: int = 0,
        shuffle: bool | None = None,
        drop_last: bool | None = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        profile_batches: bool | int = False,
        profile_skip_batches: int = 0,
        profile_dir: str | None = None,
        profile_cprofile: bool = False,
        watchdog_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(dataset, EpochsOwner) or not isinstance(dataset, LoaderDataset):
            raise NotAStreamingDatasetError(
                "The provided dataset should be either an instance of StreamingDataset, CombinedStreamingDataset or "
                f"ParallelStreamingDataset. Found a {type(dataset).__name__}: StreamingDataLoader reads only these"
            )
        if kwargs.get("in_order") is False:
            raise ValueError("StreamingDataLoader needs in_order=True: the resume point is derived from the order")
        if num_workers == 0:
            # No worker process is started, so there is no start method to choose; upstream's docs
            # pass multiprocessing_context="spawn" with the default num_workers=0, which torch refuses.
            kwargs.pop("multiprocessing_context", None)
        if num_workers > 1:
            # Each worker maps at least one chunk of a dataset read in place: cap the workers to memory.
            num_workers = capped_workers(num_workers, PassReader(dataset).in_place_chunk_bytes())
        if shuffle is not None:
            dataset.set_shuffle(shuffle)
        if drop_last is not None:
            dataset.set_drop_last(drop_last)
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        dataset.set_batch_size(batch_size)
        dataset.set_num_workers(num_workers)
        self._profile = profile_settings(
            profile_batches, profile_skip_batches, profile_dir, profile_cprofile, num_workers,
            DistributedEnv.detect().global_rank,
        )  # fmt: skip
        if isinstance(collate_fn, CollatedInDataset):  # e.g. a loader re-created from another's attributes
            collate_fn = collate_fn.collate
        collate_fn = collate_fn if collate_fn is not None else litdata_collate
        self._profiled = False  # worker 0 profiles
        if self._profile is not None and num_workers > 0:
            self._profiled = True
            kwargs["worker_init_fn"] = ProfiledWorkerInit(self._profile, kwargs.get("worker_init_fn"))
        self._watchdog: Watchdog | None = None
        seconds = watchdog_seconds(watchdog_s)
        if seconds:
            board = ActivityBoard(max(num_workers, 1))
            weakref.finalize(self, board.close)
            rank = DistributedEnv.detect().global_rank
            self._watchdog = Watchdog(seconds, board, rank, num_workers)
            if num_workers > 0:
                kwargs["worker_init_fn"] = WatchedWorkerInit(board.path, kwargs.get("worker_init_fn"))
        self._times: PassTimes | None = None
        # The passes this loader made, counted as upstream does (1 in its first pass, whatever the
        # dataset read before); the epoch a pass reads, and so its order, is the dataset's.
        self.current_epoch = 0
        self._pass_epoch = 0  # the dataset's epoch that the latest pass read
        self._resumes: int | None = None  # the dataset epoch a loaded, unfinished state continues
        self._delivered = 0  # batches delivered in that pass
        self._epoch_complete = False
        self._pool: tuple[int, int] | None = None  # persistent workers: (their token, passes made)
        self._collate = collate_fn
        self._batches_in_dataset = PassReader(dataset).batches_in_workers
        in_dataset = self._batches_in_dataset
        # (batch size, drop_last) torch batches with when the dataset yields samples; None when it batches.
        self._torch_batching = None if in_dataset else (batch_size, dataset.drop_last)
        self._workers: DataLoader[Any] | None = None  # persistent workers: the DataLoader that keeps them
        if in_dataset:
            collate_fn = CollatedInDataset(collate_fn)
        elif self._profiled:
            collate_fn = ProfiledCollate(collate_fn)  # counts worker 0's batches for its profiler
        super().__init__(
            cast("IterableDataset[Any]", dataset),
            *args,
            batch_size=None if in_dataset else batch_size,
            num_workers=num_workers,
            drop_last=False if in_dataset else dataset.drop_last,
            collate_fn=collate_fn,
            **kwargs,
        )

    # torch's own batching may be off (the dataset batches); these report what the user asked for.
    @property
    def batch_size(self) -> int:
        """The batch size asked for (torch's own is None when the dataset's workers make the batches)."""
        return self._loader_dataset.batch_size

    @batch_size.setter
    def batch_size(self, value: int | None) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        pass  # torch's __init__ stores its own (None when the dataset batches)

    @property
    def drop_last(self) -> bool:
        """Whether each worker's last partial batch is dropped (the dataset's setting)."""
        return self._loader_dataset.drop_last

    @drop_last.setter
    def drop_last(self, value: bool) -> None:  # pyright: ignore[reportIncompatibleVariableOverride]
        pass

    @property
    def _loader_dataset(self) -> LoaderDataset:
        return cast(LoaderDataset, self.dataset)  # checked in __init__ (torch forbids replacing it)

    @property
    def user_collate_fn(self) -> Callable[[list[Any]], Any]:
        """What makes a batch of samples: the ``collate_fn`` given, or the default (``collate_fn`` may wrap it)."""
        return self._collate

    def __len__(self) -> int:
        # The whole epoch, also when a loaded state dict resumes it (the pass then yields the rest).
        batches = self._reader().plan().epoch_batches
        if batches is None:
            raise TypeError(f"an endless {type(self.dataset).__name__} (length=float('inf')) has no len()")
        return batches

    def __iter__(self) -> Iterator[Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
        dataset = self._loader_dataset
        reader = self._reader()
        # Begun before any worker starts: it fixes the epoch (and any resume) the plans and workers use.
        source, token = self._pass_tokens()
        run = reader.epochs.begin(token)
        if self._resumes is None or run.epoch != self._resumes:
            self.current_epoch += 1  # a new pass; the rest of a loaded one keeps its number, as upstream
        self._resumes = None
        self._pass_epoch = run.epoch
        self._delivered = 0
        self._epoch_complete = False
        plan = reader.plan()
        # A Combined dataset that stops at its first exhausted dataset stops every rank together.
        limit = plan.limit
        epoch_token = probe.begin("dataloader", "epoch", None, epoch=self.current_epoch)
        times = self._times = PassTimes(self.current_epoch, self.num_workers)
        watchdog = self._watchdog
        if watchdog is not None and not self.num_workers:
            attach_activity(watchdog.board.path, 0)  # this process reads: it publishes what it waits on
        batching = None
        if self._batches_in_dataset:
            batching = Batching.for_pass(
                dataset.batch_size, self._collate, dataset.drop_last, workers=self.num_workers,
                pin_memory=self.pin_memory, sample_bytes=reader.gathered_sample_bytes(self._collate),
                endless=plan.worker_batches is None,
            )  # fmt: skip
        try:
            if batching is not None and self.num_workers == 0 and not self.pin_memory:
                # What torch's single-process iterator does when the dataset makes the batches, minus its bookkeeping.
                batches: Iterator[Any] = iter(PassReader(reader.dataset, token, batching))
            else:
                # The workers take this pass's reader as their dataset: torch pickles it into them.
                handed = PassReader(reader.dataset, source if self.num_workers else token, batching)
                batches = self._workers_for(handed)
            if batching is not None:
                batches = batching.received(batches, plan.worker_batches)
            counts = None
            if self.num_workers and plan.worker_batches is not None:
                counts = list(plan.worker_batches)  # which worker each batch comes from, for stats()
            workers = worker_order(counts, self.num_workers)
            if watchdog is not None:
                watchdog.start(self.current_epoch)
            with main_profiler(self._profile):
                waited = time.perf_counter()  # the training loop waits inside next() from here
                for batch in batches:
                    self._delivered += 1
                    worker = next(workers)
                    times.add(time.perf_counter() - waited, worker, batch_samples(batch))
                    if watchdog is not None:
                        watchdog.served(worker)
                    probe.instant("batch", "batch", batch=self._delivered, epoch=self.current_epoch)
                    yield batch
                    waited = time.perf_counter()
                    if watchdog is not None:
                        watchdog.waiting()
                    if limit is not None and self._delivered >= limit:
                        break
            self._epoch_complete = True
            reader.epochs.finish(run)  # (also when it stopped at the limit)
        finally:
            if watchdog is not None:
                watchdog.stop()
                if not self.num_workers:
                    attach_activity(None)
            times.ended = time.monotonic()
            times.trace()
            probe.end(epoch_token)

    def stats(self) -> LoaderStats:
        """How long the training loop waited for batches in the latest pass (so far, mid-pass).

        Total, p50 and p99 wait per batch, and each worker's batches, samples and samples/s.
        """
        times = self._times if self._times is not None else PassTimes(self.current_epoch, self.num_workers)
        return times.stats()

    def _reader(self) -> PassReader:
        return PassReader(cast(EpochsOwner, self.dataset))

    def _workers_for(self, reader: PassReader) -> Iterator[Any]:
        """The batches of a pass read by the workers of a torch DataLoader over ``reader`` (the loader's options).

        Persistent workers keep the first pass's reader (``_pass_tokens``), so their DataLoader is kept too.
        """
        workers = self._workers
        if workers is None:
            context = self.multiprocessing_context
            if self.num_workers and context is not None and context.get_start_method() == "forkserver":
                # Torch and the dataset's modules load once, in the server, not in every worker at every pass
                # (`import litdata_stream` alone loads neither: its names are lazy).
                modules = (__name__, type(reader).__module__, type(self.dataset).__module__)
                start_forkserver(list(dict.fromkeys(m for m in modules if m != "__main__")))
            sampled = self._torch_batching
            workers = DataLoader(
                reader,
                batch_size=None if sampled is None else sampled[0],
                drop_last=False if sampled is None else sampled[1],
                collate_fn=self.collate_fn,
                num_workers=self.num_workers,
                pin_memory=self.pin_memory,
                timeout=self.timeout,
                worker_init_fn=self.worker_init_fn,
                multiprocessing_context=context,
                generator=self.generator,
                prefetch_factor=self.prefetch_factor,
                persistent_workers=self.persistent_workers,
                pin_memory_device=self.pin_memory_device,
                in_order=self.in_order,
            )
            if self.persistent_workers:
                self._workers = workers
        batches = iter(workers)  # workers start here, before the main profiler does
        if self.persistent_workers:
            self._iterator = batches  # what torch's own persistent iterator would be
        if self.num_workers and self._batches_in_dataset:
            _widen_result_pipe(batches)
        return batches

    def _pass_tokens(self) -> tuple[int, int]:
        """(what the workers derive their token from, the token of this pass).

        A persistent worker derives its n-th pass's token from the one it was started with, as the loader does.
        """
        if not self.num_workers:
            token = new_token()
            return token, token
        made = 0
        if self.persistent_workers and self._pool is not None and self._iterator is not None:
            source, made = self._pool
        else:
            source = new_token()
        if self.persistent_workers:
            self._pool = (source, made + 1)
        return source, worker_token(source, made)

    def state_dict(self) -> dict[str, Any]:
        """Where the loader is: enough to resume without repeating or skipping a sample."""
        dataset = self._loader_dataset
        # After a whole pass the dataset is at the start of its next epoch: nothing of it delivered.
        delivered = 0 if self._epoch_complete else self._delivered
        size = dataset.batch_size
        state = dataset.state_dict(delivered * size, self.num_workers, size, delivered)
        # Upstream LitData's loader reads these two (a StreamingDataset's state carries the epoch's
        # count of samples; none, after a whole pass, makes upstream start its next epoch afresh).
        yielded = state.get("num_samples_yielded")
        if not isinstance(yielded, int):  # a Combined or Parallel dataset's: per dataset
            yielded = self._delivered * size
        batches = yielded // size
        return {
            "dataset": state,
            "current_epoch": self.current_epoch,
            "pass_epoch": self._pass_epoch,
            "num_samples_yielded": yielded,
            "latest_worker_idx": (batches - 1) % max(self.num_workers, 1) if batches else 0,
            "epoch_complete": self._epoch_complete,
        }

    def load_state_dict(self, obj: dict[str, Any]) -> None:
        """Continue from ``obj`` (a state dict) on the next iteration (another num_workers or world size is fine).

        Args:
            obj: A dict from :meth:`state_dict`, or an upstream LitData ``StreamingDataLoader``'s.

        Raises:
            ValueError: ``obj`` has no ``dataset`` or ``current_epoch`` entry.
        """
        if "dataset" not in obj or "current_epoch" not in obj:
            raise ValueError("not a StreamingDataLoader state dict: it needs 'dataset' and 'current_epoch'")
        self.current_epoch = int(obj["current_epoch"])
        # Upstream's states (and ours before "pass_epoch") number the loader's passes as the epochs.
        self._pass_epoch = int(obj.get("pass_epoch", self.current_epoch))
        self._delivered = 0
        self._epoch_complete = bool(obj.get("epoch_complete"))
        # Persistent workers hold a reader of a dataset copy without the resume point: start new ones.
        self._iterator = None
        self._workers = None
        self._pool = None
        reader = self._reader()
        reader.load_loader_state(obj)
        if self._epoch_complete or self.current_epoch == 0:
            reader.reset_to_epoch(self._pass_epoch + 1)  # the next iteration starts the next epoch
            self._resumes = None
        else:  # upstream's rule: a pass continues the loaded one only if that one had delivered something
            yielded = obj.get("num_samples_yielded")
            started = any(yielded.values()) if isinstance(yielded, dict) else bool(yielded)
            self._resumes = self._pass_epoch if started else None


def _widen_result_pipe(iterator: Any) -> None:
    """Let the pipe the workers send batches through hold a whole array batch (Linux: 64 KiB -> 1 MiB).

    A batch bigger than the pipe is written in pieces, each waiting for the main process to read the
    previous one. Where the pipe cannot grow (another OS, the pipe quota spent), it stays as it is.
    """
    import fcntl

    reader = getattr(getattr(iterator, "_worker_result_queue", None), "_reader", None)
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if reader is None or set_size is None:
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(reader.fileno(), set_size, ArrayBatch.LIMIT)
