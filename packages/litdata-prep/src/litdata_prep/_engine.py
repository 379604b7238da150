"""The parent side of a job: start the worker processes, feed them, watch them, show progress.

Nothing here can hang on a dead worker: the parent waits on every worker's pipe (its events:
progress, done, failed) and its process sentinel together, so an exception in ``fn`` (reported by
the worker with its traceback) or a worker killed by a signal stops the job with one clear error,
after the other workers are terminated. Inputs for the shared queue are pickled in the parent's feeder
thread, so an input that cannot be pickled is an error too, never a silently dropped sample.
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing as mp
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait as mp_wait
from typing import Any, TypeVar

from litdata_io import start_forkserver
from litdata_io.internal import forkserver_running
from litdata_prep._inputs import InputStream, Numbered
from litdata_prep._worker import Done, Failed, Progress, WorkerEvent, WorkerSpec, describe_input, worker_main

__all__ = ["ALL_DONE", "ProgressBar", "WorkerError", "default_start_method", "run_workers"]

#: The value that ends a ``queue`` given to ``optimize`` (one is enough for every worker).
ALL_DONE = "ALL_DONE"

T = TypeVar("T")

_POLL_S = 0.1
_JOIN_S = 5.0


class _RemoteTraceback(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class WorkerError(RuntimeError):
    """A worker process failed: ``fn`` raised on an input, or the process died.

    Attributes:
        input: a short ``repr`` of the input being processed, if known.
        position: its position in the inputs, if known.
        rank: the worker's global rank.
        remote_traceback: the formatted traceback from the worker, if it sent one.
    """

    def __init__(
        self,
        message: str,
        rank: int,
        input: str | None = None,
        position: int | None = None,
        remote_traceback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.rank = rank
        self.input = input
        self.position = position
        self.remote_traceback = remote_traceback
        if remote_traceback:
            self.__cause__ = _RemoteTraceback(remote_traceback)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


_MIN_BATCH_CAP = 512
_MAX_BATCH = 1 << 16
# An iterator's batches (see _Feeder._send_stream): at most this many inputs, about this many bytes.
_STREAM_BATCH = 4096
_STREAM_BATCH_BYTES = 1 << 20


def batch_bounds(total: int, num_workers: int) -> list[tuple[int, int]]:
    """The shared queue's batches of ``total`` inputs: contiguous ``[start, stop)`` runs, shrinking.

    A worker ends a chunk where a batch does not continue its last one, so the fewer batches, the
    fewer extra chunks (and queue messages). Batches start large (a share of what is left) and shrink
    to a floor, as in guided scheduling, so a slow worker holds at most a small last batch.
    """
    floor = max(1, min(_MIN_BATCH_CAP, total // (num_workers * 16)))
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < total:
        size = max(floor, min(_MAX_BATCH, (total - start) // (2 * num_workers)))
        bounds.append((start, min(total, start + size)))
        start += size
    return bounds


class _Feeder(threading.Thread):
    """Puts this node's inputs (or what arrives on the user's queue) on the workers' shared queue.

    The batches are pickled as they are put (:meth:`_payloads`); :meth:`heads` takes the first
    ones before the workers start, one per worker, so that each starts on its own batch at once
    instead of waiting for the parent to start the others and this thread.
    """

    def __init__(self, work: Any, items: Numbered | InputStream | None, source: Any, num_workers: int) -> None:
        super().__init__(name="litdata-feeder", daemon=True)
        self.work, self.items, self.source, self.num_workers = work, items, source, num_workers
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.fed = 0
        self.finished = False  # every input was handed out (the user's queue: its ALL_DONE arrived)
        self._batches = self._payloads()

    def _put(self, obj: Any) -> None:
        while not self.stop.is_set():
            try:
                self.work.put(obj, timeout=_POLL_S)
                return
            except queue.Full:
                continue
        raise InterruptedError

    def _pickle(self, batch: Sequence[tuple[int, Any]]) -> bytes:
        """``batch`` as the workers receive it, counted as handed out."""
        try:
            payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            for pos, item in batch:  # name the input that cannot travel
                try:
                    pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as err:
                    raise TypeError(
                        f"input #{pos} {describe_input(item)} cannot be pickled for the workers: {err}"
                    ) from err
            raise
        self.fed += len(batch)
        return payload

    def _stream_payloads(self, stream: InputStream) -> Iterator[bytes]:
        """An iterator's inputs in runs of consecutive inputs: one input first, then doubling.

        Its length is unknown: small batches start the workers at once, larger ones cost fewer messages
        and chunks. The growth stops at ``_STREAM_BATCH`` inputs and ``_STREAM_BATCH_BYTES`` of pickle, so
        the batches in flight stay small whatever one input weighs.
        """
        inputs, size = iter(stream), 1
        while pairs := list(itertools.islice(inputs, size)):
            first = pairs[0][0]
            payload = self._pickle(Numbered(range(first, first + len(pairs)), [item for _, item in pairs]))
            yield payload
            if len(payload) > _STREAM_BATCH_BYTES:
                size = max(1, size // 2)
            elif 2 * len(payload) <= _STREAM_BATCH_BYTES:
                size = min(_STREAM_BATCH, size * 2)

    def _payloads(self) -> Iterator[bytes]:
        """The pickled batches, in the order they go on the queue."""
        if isinstance(self.items, InputStream):
            yield from self._stream_payloads(self.items)
        elif self.items is not None:
            for start, stop in batch_bounds(len(self.items), self.num_workers):
                yield self._pickle(self.items[start:stop])  # a slice of a range is a range: a few bytes
        else:
            while True:
                if self.stop.is_set():
                    raise InterruptedError
                try:
                    item = self.source.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                if isinstance(item, str) and item == ALL_DONE:
                    return
                yield self._pickle([(self.fed, item)])

    def heads(self) -> list[bytes | None]:
        """The first batch of each worker, taken now (none from the user's queue: it may not have one yet)."""
        heads: list[bytes | None] = [None] * self.num_workers
        if self.items is not None:
            for rank, payload in zip(range(self.num_workers), self._batches):
                heads[rank] = payload
        return heads

    def run(self) -> None:
        try:
            for payload in self._batches:
                self._put(payload)
            self.finished = True
            for _ in range(self.num_workers):
                self._put(None)
        except InterruptedError:
            pass
        except BaseException as err:
            self.error = err


class _WorkQueue:
    """A worker's end of the shared queue: its first batch (taken before it started), then the queue."""

    def __init__(self, work: Any, head: bytes | None) -> None:
        self.work, self.head = work, head

    def get(self) -> Any:
        head, self.head = self.head, None
        return head if head is not None else self.work.get()


class ProgressBar:
    """The job's one tqdm bar on the driver (none when not ``verbose``), shared by the local and Ray engines."""

    def __init__(self, total: int | None, desc: str, verbose: bool) -> None:
        self.total, self.desc, self.verbose = total, desc, verbose
        self.bar: Any = None

    def show(self) -> None:
        """Open the bar (called once the workers are started, so tqdm's import overlaps their start-up)."""
        if not self.verbose:
            return
        if "ipykernel" in sys.modules:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm

        self.bar = tqdm(
            total=self.total, desc=self.desc, unit="item", smoothing=0.1, mininterval=0.5, dynamic_ncols=True
        )

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _native_threads() -> list[str]:
    """The names of this process's threads that Python did not start and that were given a name.

    The idle pools of OpenMP, BLAS and torch keep the process's name; an async runtime's threads are
    named (obstore's ``tokio-rt-worker``, ...) and may hold a lock at any moment.
    """
    tasks = "/proc/self/task"
    try:
        own = {t.native_id for t in threading.enumerate()}
        with open(f"{tasks}/{os.getpid()}/comm") as handle:
            unnamed = handle.read().strip()
        named = []
        for tid in os.listdir(tasks):
            if int(tid) in own:
                continue
            with open(f"{tasks}/{tid}/comm") as handle:
                name = handle.read().strip()
            if name != unnamed:
                named.append(name)
        return sorted(set(named))
    except OSError:  # a thread ended while being read: look again next time, fork not now
        return ["?"]


def _stop_progress_monitors() -> None:
    """Stop tqdm's monitor threads (they never end), so that a script that showed a progress bar can fork.

    Stopped the way tqdm stops them (``TMonitor.exit``); the next bar starts a new one.
    """
    monitor_class = getattr(sys.modules.get("tqdm._monitor"), "TMonitor", None)
    if monitor_class is None:
        return
    for thread in threading.enumerate():
        if isinstance(thread, monitor_class):
            stop: Any = thread
            stop.exit()
            owner = getattr(thread, "tqdm_cls", None)
            if owner is not None and getattr(owner, "monitor", None) is thread:
                owner.monitor = None


def default_start_method() -> tuple[str, str]:
    """How the default workers on Linux start, ``"fork"`` or ``"forkserver"``, and why (for the job's log line).

    A forked worker inherits every lock as it was, and one another thread held stays held forever.
    So this process forks, as torch's ``DataLoader`` does, when no other Python thread is alive and
    no named native thread runs (:func:`_native_threads`; torch's idle pools do not count). A
    forkserver already running is used as it is (its workers start warm); otherwise a new one gives
    the workers a process with no threads. ``fn`` is checked by the forkserver's rules either way.
    """
    if forkserver_running():
        return "forkserver", "the forkserver this process started already runs (its workers start warm)"
    _stop_progress_monitors()
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread() and t.is_alive()]
    if others:
        return "forkserver", (
            f"thread {others[0]!r} runs in this process and could hold a lock a forked worker would inherit"
        )
    native = _native_threads()
    if native:
        return "forkserver", (
            f"native thread {native[0]!r} (an async runtime such as obstore's) runs in this process and could "
            "hold a lock a forked worker would inherit"
        )
    if "torch" in sys.modules:
        why = "this process runs no other thread; torch's idle thread pools do not count, as for torch's DataLoader"
        return "fork", why
    return "fork", "this process runs no other thread"


def run_workers(
    specs: Sequence[WorkerSpec],
    start_method: str,
    then: Callable[[dict[int, Done]], T],
    shared: Numbered | InputStream | None = None,
    source: Any = None,
    total: int | None = None,
    verbose: bool = True,
    desc: str = "optimize",
) -> T:
    """Run one process per spec until all finish; return what ``then`` makes of what each rank reported.

    ``then`` (publishing the job's results) runs once every worker reported that it finished, while
    the worker processes exit (slow for a process forked from one that holds torch). This returns once
    ``then`` did: workers still exiting are reaped by the next job or at the interpreter's exit
    (:func:`_leave_exiting`); after a failure, every worker is stopped and reaped before the error is raised.

    Args:
        specs: the workers.
        start_method: ``"spawn"``, ``"fork"`` or ``"forkserver"``.
        then: what to do with each rank's :class:`Done` once all finished; its result is returned.
        shared: inputs for the shared queue (specs then have ``items=None``).
        source: the user's queue to relay, ended by :data:`ALL_DONE`.
        total: inputs expected, for the progress bar.
        verbose: show the progress bar.
        desc: the progress bar's label.

    Raises:
        WorkerError: a worker failed or died; the other workers are stopped first.
    """
    _reap_exiting()
    ctx: Any = mp.get_context(start_method)
    if start_method == "forkserver":
        start_forkserver([worker_main.__module__])  # the script and the worker's modules load once
    uses_queue = shared is not None or source is not None
    work = ctx.Queue(maxsize=max(8, 4 * len(specs))) if uses_queue else None
    feeder = _Feeder(work, shared, source, len(specs)) if uses_queue else None
    procs: dict[int, Any] = {}
    pipes: dict[int, Any] = {}  # rank -> the read end of the worker's pipe (its events, in order)
    closed: set[int] = set()  # the ranks whose pipe was closed at the other end
    finished = False
    summaries: dict[int, Done] = {}
    progress = ProgressBar(total, desc, verbose)
    processed = 0
    heard: set[int] = set()
    environ = dict(os.environ)  # one snapshot: every worker starts with the same environment
    try:
        try:
            heads = feeder.heads() if feeder is not None else [None] * len(specs)
        except Exception as err:
            raise WorkerError(f"{desc}: {err}", -1) from err
        for spec, head in zip(specs, heads):
            inputs = _WorkQueue(work, head) if work is not None else None
            pipes[spec.rank], sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(
                target=worker_main, args=(spec, sender, inputs, environ), name=f"litdata-{desc}-{spec.rank}"
            )
            try:
                proc.start()
            except Exception as err:
                raise WorkerError(
                    f"{desc}: worker {spec.rank} could not be started with start_method={start_method!r}: {err}",
                    spec.rank,
                ) from err
            finally:
                sender.close()  # the worker's copy is the one it writes to
            procs[spec.rank] = proc
        if feeder is not None:
            feeder.start()
        progress.show()

        def handle(event: WorkerEvent) -> None:
            nonlocal processed
            heard.add(event.rank)
            if isinstance(event, Progress):
                processed += event.inputs
                progress.update(event.inputs)
            elif isinstance(event, Done):
                summaries[event.rank] = event
            elif isinstance(event, Failed):
                # "We found the following error": upstream's words, which code written for it may match.
                message = f"{desc}: {event.headline} (We found the following error in the worker; traceback above)"
                raise WorkerError(message, event.rank, event.input, event.position, event.traceback)

        def hear(rank: int) -> None:
            """Handle what worker ``rank`` sent so far (a worker that ended has nothing more to send)."""
            pipe = pipes[rank]
            try:
                while rank not in summaries and pipe.poll():
                    handle(pipe.recv())
            except (EOFError, OSError):
                closed.add(rank)  # it ended, or is ending: its sentinel says when

        while len(summaries) < len(procs):
            if feeder is not None and feeder.error is not None:
                raise WorkerError(f"{desc}: {feeder.error}", -1) from feeder.error
            waiting = [rank for rank in procs if rank not in summaries]
            watched = [pipes[r] for r in waiting if r not in closed] + [procs[r].sentinel for r in waiting]
            ready = set(mp_wait(watched, timeout=_POLL_S))
            for rank in waiting:
                if pipes[rank] in ready:
                    hear(rank)
            for rank in waiting:
                proc = procs[rank]
                if rank in summaries or proc.exitcode is None:
                    continue
                hear(rank)  # what it sent before it ended
                if rank in summaries:
                    continue
                code = proc.exitcode
                how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
                hint = "out of memory? killed from outside?"
                if rank not in heard and code > 0 and start_method != "fork":
                    hint = (
                        f"it failed while starting: with start_method={start_method!r} the script is imported again "
                        "by the workers, so call optimize/map under `if __name__ == '__main__':` (see the worker's "
                        "stderr)"
                    )
                raise WorkerError(
                    f"{desc}: worker {rank} (pid {proc.pid}) {how} before finishing its inputs; the job is stopped "
                    f"({hint})",
                    rank,
                )
        if feeder is not None:
            feeder.join(timeout=_JOIN_S)
            if feeder.error is not None:
                raise WorkerError(f"{desc}: {feeder.error}", -1) from feeder.error
        if work is not None:
            work.close()  # every batch was taken: its thread in this process ends while `then` runs
        expected = feeder.fed if feeder is not None else total
        if expected is not None and processed != expected:
            raise WorkerError(f"{desc}: {expected} inputs were handed out but {processed} were processed", -1)
        result = then(summaries)
        # Each worker reported its last file: the ones still exiting are reaped later (see _leave_exiting).
        _leave_exiting([proc for proc in procs.values() if proc.exitcode is None])
        finished = True
        return result
    finally:
        progress.close()
        if feeder is not None:
            feeder.stop.set()
            if source is not None and not feeder.finished:
                # Stopped before the user's queue ended: its producer may be blocked on the full queue, and the
                # interpreter's exit joins that process. Reading the queue to its ALL_DONE lets it finish.
                threading.Thread(target=_drain, args=(source,), name="litdata-drain", daemon=True).start()
        if not finished:
            _stop(list(procs.values()))
        for pipe in pipes.values():
            pipe.close()
        if work is not None:
            if not finished:  # a dead worker may have left the queue full: do not wait to flush it
                work.cancel_join_thread()
            work.close()
            if finished:
                work.join_thread()  # its feeder thread, so the next job sees no thread of this one running


def _drain(source: Any) -> None:
    """Read and drop what arrives on the user's queue until its :data:`ALL_DONE` (or the queue is closed)."""
    while True:
        try:
            item = source.get()
        except (EOFError, OSError, ValueError):
            return
        if isinstance(item, str) and item == ALL_DONE:
            return


# The workers of finished jobs that were still exiting when their job returned (a forked child has none).
_EXITING: list[Any] = []
os.register_at_fork(after_in_child=_EXITING.clear)


def _leave_exiting(procs: list[Any]) -> None:
    """Let ``procs``, which reported everything and only exit, finish exiting after the job returns.

    A forked worker's exit tears down its copy of the parent's page tables: 10-30 ms for a process
    that holds torch, which the call would otherwise wait for. They are reaped by the next job's
    start or at the interpreter's exit (before multiprocessing joins its children), as :func:`_stop`
    does: one that cannot exit within ``_JOIN_S`` (a non-daemon thread of ``fn`` that never ends) is
    terminated.
    """
    if procs and not _EXITING:
        atexit.register(_reap_exiting)  # registered after multiprocessing's own: runs before it
    _EXITING.extend(procs)


def _reap_exiting() -> None:
    if _EXITING:
        atexit.unregister(_reap_exiting)
        procs = _EXITING[:]
        _EXITING.clear()
        _stop(procs, wait=True)


def _stop(procs: list[Any], wait: bool = False) -> None:
    """End ``procs``: terminated now, or given ``_JOIN_S`` to exit first (``wait``); killed if that fails."""
    if wait:
        deadline = time.monotonic() + _JOIN_S
        for proc in procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
    alive = [p for p in procs if p.is_alive()]
    for proc in alive:
        proc.terminate()
    deadline = time.monotonic() + _JOIN_S
    for proc in alive:
        proc.join(timeout=max(0.1, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=_JOIN_S)
