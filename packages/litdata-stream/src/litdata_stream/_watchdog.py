"""A StreamingDataLoader's hang watchdog and its stall telemetry.

When the training loop has waited inside ``next()`` for ``watchdog_s`` seconds (time between batches
does not count), a daemon thread reads what every DataLoader worker publishes on its
:class:`~litdata_io.internal.ActivityBoard` slot and reports it as a :class:`LoaderStallWarning` and a
``stall`` tracer event, again every ``watchdog_s`` while the stall lasts. :class:`LoaderStats`
summarises the loop's wait per batch in a pass (``StreamingDataLoader.stats()``).
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from litdata_format.internal import read_seconds
from litdata_io.internal import ActivityBoard, attach_activity, holder_state, probe

__all__ = [
    "ENV_WATCHDOG",
    "LoaderStallWarning",
    "LoaderStats",
    "PassTimes",
    "Watchdog",
    "WatchedWorkerInit",
    "watchdog_seconds",
]

ENV_WATCHDOG = "LITDATA_WATCHDOG_S"
DEFAULT_WATCHDOG_S = 300.0


class LoaderStallWarning(UserWarning):
    """No batch reached the training loop for the watchdog's time; the message says where each worker is."""


def watchdog_seconds(value: float | None) -> float:
    """The watchdog's period: ``value``, else ``LITDATA_WATCHDOG_S``, else 300 s; 0 turns it off."""
    if value is None:
        setting = read_seconds(ENV_WATCHDOG)
        return DEFAULT_WATCHDOG_S if setting is None else setting
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        raise ValueError(f"watchdog_s={value!r} must be a finite number of seconds >= 0 (0 turns the watchdog off)")
    return float(value)


class WatchedWorkerInit:
    """The loader's ``worker_init_fn``: attaches the worker to its board slot, then calls the user's."""

    def __init__(self, path: str, user_init: Callable[[int], Any] | None) -> None:
        self.path = path
        self.user_init = user_init

    def __call__(self, worker_id: int) -> None:
        attach_activity(self.path, worker_id)
        if self.user_init is not None:
            self.user_init(worker_id)


class Watchdog:
    """Reports where the ``workers`` (0: the main process reads) are when the loop has waited ``seconds`` for a batch.

    :meth:`waiting` is called when it starts to wait, :meth:`served` when the batch came.
    """

    def __init__(self, seconds: float, board: ActivityBoard, rank: int, workers: int) -> None:
        self.seconds = seconds
        self.board = board
        self.rank = rank
        self.workers = workers
        self.since: float | None = None  # when the loop started waiting (None: it is not waiting)
        self.delivered = [0.0] * max(workers, 1)  # when each worker's last batch came (or the pass began)
        self.reports = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def waiting(self) -> None:
        self.since = time.monotonic()

    def served(self, worker: int = 0) -> None:
        self.since = None
        self.delivered[worker] = time.monotonic()

    def start(self, epoch: int) -> None:
        self.waiting()
        self.delivered = [time.monotonic()] * len(self.delivered)
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, args=(epoch,), name="litdata-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def _watch(self, epoch: int) -> None:
        reported = 0.0  # when the last report of this stall went out (0: none yet)
        check = min(self.seconds / 4, 5.0)
        while not self._stop.wait(check):
            now, since = time.monotonic(), self.since
            if since is None or now - since < self.seconds:
                reported = 0.0
            elif not reported or now - reported >= self.seconds:
                reported = now
                self._report(epoch, now - since)

    def _report(self, epoch: int, idle: float) -> None:
        now = time.time()
        names = [f"worker {i}" for i in range(self.workers)] if self.workers else ["main process"]
        lines = [
            f"the training loop has waited {idle:.0f} s for a batch (rank {self.rank}, epoch {epoch}); "
            "what each worker is doing:"
        ]
        clock = time.monotonic()
        for name, doing, pid, delivered in zip(names, self.board.read(), self.board.pids(), self.delivered):
            what = "; ".join(f"{item.text} (for {now - item.since:.0f} s)" for item in doing) or "nothing in LitData"
            who = f"pid {pid}, {holder_state(pid)}" if pid else "not started"
            if self.workers and clock - delivered >= self.seconds:  # the one the loop waits for is among these
                who += f", no batch from it for {clock - delivered:.0f} s"
            lines.append(f"  rank {self.rank} {name} ({who}): {what}")
            probe.instant("stall", "stall", rank=self.rank, worker=name, idle_s=round(idle, 3),
                          doing=what.replace(";", ","))  # fmt: skip
        self.reports += 1
        message = "\n".join(lines) + f"\n(set {ENV_WATCHDOG} or watchdog_s= to change the period, 0 to turn it off)"
        try:
            warnings.warn(LoaderStallWarning(message), stacklevel=1)
        except Warning as err:  # warnings turned into errors: they would only end this thread
            print(f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class WorkerThroughput:
    """What one DataLoader worker delivered in a pass.

    Attributes:
        worker: the torch worker id (0 for the main process when ``num_workers=0``).
        batches: batches it delivered.
        samples: samples in them (the leading dimension of each batch's first leaf).
        samples_per_s: ``samples`` over the pass's seconds.
    """

    worker: int
    batches: int
    samples: int
    samples_per_s: float


@dataclass(frozen=True)
class LoaderStats:
    """How long the training loop waited for batches in one pass of a StreamingDataLoader.

    Attributes:
        epoch: the pass's epoch.
        batches: batches delivered.
        seconds: wall time from the start of the pass to its last batch (or now, mid-pass).
        total_wait_s: time spent inside ``next()`` waiting for them (worker start-up included).
        p50_wait_s: median wait for one batch.
        p99_wait_s: 99th percentile of the wait for one batch.
        workers: per-worker batches, samples and samples/s.
    """

    epoch: int
    batches: int
    seconds: float
    total_wait_s: float
    p50_wait_s: float
    p99_wait_s: float
    workers: tuple[WorkerThroughput, ...]

    def as_dict(self) -> dict[str, Any]:
        """The statistics as plain dicts and numbers (to log them as JSON, say)."""
        return asdict(self)


class PassTimes:
    """The per-batch record of one pass: a wait (float) and a sample count per worker."""

    def __init__(self, epoch: int, workers: int) -> None:
        self.epoch = epoch
        self.started = time.monotonic()
        self.ended: float | None = None
        self.waits: list[float] = []
        self.batches = [0] * max(workers, 1)
        self.samples = [0] * max(workers, 1)

    def add(self, wait: float, worker: int, samples: int) -> None:
        self.waits.append(wait)
        self.batches[worker] += 1
        self.samples[worker] += samples

    def stats(self) -> LoaderStats:
        end = self.ended if self.ended is not None else time.monotonic()
        seconds = max(end - self.started, 1e-9)
        ordered = sorted(self.waits)
        per_worker = tuple(
            WorkerThroughput(worker, batches, samples, samples / seconds)
            for worker, (batches, samples) in enumerate(zip(self.batches, self.samples))
        )
        return LoaderStats(self.epoch, len(ordered), seconds, sum(ordered), _quantile(ordered, 0.5),
                           _quantile(ordered, 0.99), per_worker)  # fmt: skip

    def trace(self) -> None:
        stats = self.stats()
        rates = {f"worker{w.worker}_samples_per_s": round(w.samples_per_s, 3) for w in stats.workers}
        probe.instant("loader_stats", "epoch", epoch=stats.epoch, batches=stats.batches,
                      seconds=round(stats.seconds, 6), total_wait_s=round(stats.total_wait_s, 6),
                      p50_wait_s=round(stats.p50_wait_s, 6), p99_wait_s=round(stats.p99_wait_s, 6),
                      **rates)  # fmt: skip


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of sorted values (0 when there are none)."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def batch_samples(batch: Any) -> int:
    """The samples in a batch: its first array leaf's leading dimension, else the length of the list holding it."""
    listed = 1  # the length of the innermost list met on the way down to the first leaf
    while True:
        if isinstance(batch, dict):  # checked first: the usual batch
            if not batch:
                return 0
            batch = next(iter(batch.values()))
        elif isinstance(batch, (list, tuple)):
            if not batch:
                return 0
            listed = len(batch)
            batch = batch[0]
        else:
            shape = getattr(batch, "shape", None)
            return int(shape[0]) if shape else listed


def worker_order(counts: Sequence[int] | None, workers: int) -> Any:
    """The worker each delivered batch comes from: round-robin over those with batches left (``counts``, if known)."""
    if not workers:
        while True:
            yield 0
    if counts is None:
        while True:
            yield from range(workers)
    left = list(counts)
    while any(left):
        for worker in range(len(left)):
            if left[worker]:
                left[worker] -= 1
                yield worker
    while True:  # more than planned (a subclass's own batches): keep cycling
        yield from range(workers)
