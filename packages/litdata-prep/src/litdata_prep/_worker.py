"""The worker process: run ``fn`` over inputs, write chunks (optimize) or files (map), publish them.

A worker takes its inputs either from a static contiguous slice (optimize's default for a sequence
of inputs, and ``keep_data_ordered=True``) or from the node's shared queue (pickled batches of
``(position, input)`` pairs as ``Numbered``, ``None`` to stop). It tells the parent about
progress, completion and failure on ``events`` (its pipe to the parent); a failure message names the input (or,
when a file could not be written, the file and the OS error) and carries the formatted traceback
of the original exception.
"""

from __future__ import annotations

import functools
import gc
import inspect
import os
import pickle
import shutil
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import GeneratorType
from typing import Any, ClassVar

from litdata_format import BinaryWriter, ChunkInfo, DatasetIndex
from litdata_format.internal import WriterOptions, normalize_key, read_text, tree_flatten, tree_unflatten
from litdata_io import Dir, enable_tracer, trace_crash, trace_enabled
from litdata_io.internal import declare_worker, freeze_inherited
from litdata_prep._checkpoint import WorkerCheckpoint, chunk_keys_name
from litdata_prep._inputs import Numbered
from litdata_prep._output import Output
from litdata_prep._publish import Publisher

__all__ = [
    "Done",
    "Failed",
    "FnFailed",
    "MapTask",
    "OptimizeTask",
    "Progress",
    "WorkerEvent",
    "WorkerSpec",
    "describe_input",
    "run_spec",
    "worker_main",
]

_PROGRESS_EVERY_S = 0.2

#: An input as the worker's loop takes it: its place in the slice, its position, itself, its download or None.
Fetched = tuple[int, int, Any, "Future[Any] | None"]


def describe_input(item: Any, limit: int = 200) -> str:
    """A short ``repr`` of an input for error messages."""
    try:
        text = repr(item)
    except Exception:
        text = f"<{type(item).__name__} with a failing repr>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class OptimizeTask:
    """What an ``optimize`` worker does besides running ``fn``: write chunks.

    With ``keep_order`` (the shared queue's batches are runs of consecutive inputs) a chunk ends where
    a batch does not continue the last one, and ``Done.chunk_inputs`` gives each chunk's first input
    position, so the index can list the chunks in input order.
    """

    writer: WriterOptions
    encryption: Any = None  # the encryption the writer options were checked with
    key_fn: Callable[[Any], Any] | None = None  # each sample's key goes back to the parent with the index
    chunk_index: int = 0  # the number of this worker's first chunk (append mode)
    checkpoint: WorkerCheckpoint | None = None  # where to resume (use_checkpoint)
    keep_order: bool = False
    what: ClassVar[str] = "optimize"  # the job's name in messages


@dataclass(frozen=True)
class MapTask:
    """What a ``map`` worker does besides running ``fn``: publish the files ``fn`` wrote."""

    what: ClassVar[str] = "map"


@dataclass(frozen=True)
class WorkerSpec:
    """Everything one worker process needs (pickled to it under spawn), built whole by the parent."""

    task: OptimizeTask | MapTask
    fn: Callable[..., Any]
    rank: int  # the global worker number (it names chunk files)
    staging: str  # this worker's local staging folder
    output: Output
    items: Numbered | None = None  # the static slice, or None: the shared queue
    reader: Any = None
    input_dir: Dir | None = None  # a remote input folder whose files are downloaded before fn sees them
    upload_threads: int = 2
    downloaders: int = 2  # inputs whose files are downloaded ahead of fn (num_downloaders)
    env: dict[str, str] = field(default_factory=dict[str, str])  # set in the worker


@dataclass(frozen=True)
class Progress:
    """A worker finished ``inputs`` more inputs since its last report."""

    rank: int
    inputs: int


@dataclass(frozen=True)
class Done:
    """A worker finished all its inputs."""

    rank: int
    summary: dict[str, Any]  # counts of what it wrote
    index: DatasetIndex | None = None  # an optimize worker's chunks, in the order written
    keys: list[Any] | None = None  # with key_fn, each sample's key in sample order
    chunk_inputs: list[int] | None = None  # with keep_order, per chunk the input of its first sample


@dataclass(frozen=True)
class Failed:
    """A worker failed: on input ``input`` (a short repr) at ``position`` when ``fn`` raised, else on none."""

    rank: int
    headline: str
    position: int | None
    input: str | None
    traceback: str


#: What a worker tells the parent on ``events``.
WorkerEvent = Progress | Done | Failed


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"


class FnFailed(Exception):
    """``fn`` raised on one input, or the writer refused a sample it returned (``refused``)."""

    def __init__(self, pos: int, item: Any, text: str, refused: bool = False) -> None:
        super().__init__(text)
        self.pos = pos
        self.item = describe_input(item)
        self.text = text
        self.refused = refused

    def headline(self, rank: int) -> str:
        what = "a sample fn returned was refused for" if self.refused else "fn raised on"
        return f"{what} input {self.item} (position {self.pos}, worker {rank}): {_last_line(self.text)}"


def _write_failure(err: BaseException, spec: WorkerSpec) -> str | None:
    """What to tell the user when ``err`` failed to write one of the job's files (no sample to blame), else None."""
    if not isinstance(err, OSError) or not err.filename or err.errno is None:
        return None
    path = Path(os.fsdecode(err.filename))
    if not (path.is_relative_to(spec.staging) or spec.output.holds(path)):
        return None  # e.g. an input file a serializer could not read
    return (
        f"worker {spec.rank} could not write {path}: [Errno {err.errno}] {err.strerror}. Free space there (a remote "
        "output_dir stages its chunks under TMPDIR) or write elsewhere, then run the job again"
    )


class _Inputs:
    """Downloads the remote files an input names (under ``input_dir``) and cleans them up after.

    With ``downloaders`` > 0 a thread pool fetches the files of the next inputs while ``fn`` runs on
    the current one (upstream's ``num_downloaders``). Each input gets its own folder, so two inputs
    naming the same file never remove it from under each other.
    """

    def __init__(self, spec: WorkerSpec) -> None:
        url = spec.input_dir.url if spec.input_dir is not None else None
        self.url = url.rstrip("/") + "/" if url else None
        self.cache = Path(spec.staging) / "inputs"
        self.storage = None
        if url:
            from litdata_io import get_storage  # only a remote input folder needs the storage layer

            self.storage = get_storage(url, spec.output.storage_options)  # the job's one set
        self.reader = spec.reader
        self.active = self.storage is not None or self.reader is not None  # else inputs go to fn as they are
        self.ahead = spec.downloaders if self.storage is not None else 0
        self._pool = ThreadPoolExecutor(self.ahead, thread_name_prefix="litdata-download") if self.ahead else None

    def download(self, pos: int, item: Any) -> tuple[Any, list[Path]]:
        """``item`` with its remote file names replaced by local copies, and the folder holding them."""
        if self.storage is None or self.url is None:
            return item, []
        leaves, spec = tree_flatten(item)
        folder = self.cache / str(pos)
        changed = False
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, str) and leaf.startswith(self.url):
                key = leaf[len(self.url) :]
                dest = folder / key
                dest.parent.mkdir(parents=True, exist_ok=True)
                self.storage.download(key, dest)
                leaves[i], changed = str(dest), True
        return (tree_unflatten(leaves, spec), [folder]) if changed else (item, [])

    def ahead_of(self, numbered: Iterator[Fetched]) -> Iterator[Fetched]:
        """The inputs of ``numbered``, each with the download of its files already started (none: as they are)."""
        pool = self._pool
        return numbered if pool is None else self._fetching(pool, numbered)

    def _fetching(self, pool: ThreadPoolExecutor, numbered: Iterator[Fetched]) -> Iterator[Fetched]:
        window: deque[Fetched] = deque()
        for i, pos, item, _ in numbered:
            window.append((i, pos, item, pool.submit(self.download, pos, item)))
            if len(window) > self.ahead:
                yield window.popleft()
        yield from window

    def prepare(self, pos: int, item: Any, fetched: Future[Any] | None) -> tuple[Any, list[Path]]:
        item, local = fetched.result() if fetched is not None else self.download(pos, item)
        if self.reader is not None:
            item = self.reader.read(item)
        return item, local


class _Worker:
    def __init__(self, spec: WorkerSpec, events: Any) -> None:
        self.spec = spec
        self.events = events
        self.inputs = _Inputs(spec)
        self.publisher = Publisher(spec.output, threads=spec.upload_threads)
        self.done_inputs = 0
        self._reported = 0
        self._last_report = time.monotonic()
        self.batch_starts: set[int] = set()  # positions opening a shared-queue batch that does not continue the last

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.done_inputs > self._reported and (force or now - self._last_report >= _PROGRESS_EVERY_S):
            self.events.put(Progress(self.spec.rank, self.done_inputs - self._reported))
            self._reported, self._last_report = self.done_inputs, now

    def numbered_inputs(self, work: Any) -> Iterator[Fetched]:
        """``(position in the slice, input position, input, None)``, from the slice or the shared queue.

        The None is the place of the input's download (:meth:`_Inputs.ahead_of`).
        """
        if self.spec.items is not None:
            task = self.spec.task
            start = task.checkpoint.next_input if isinstance(task, OptimizeTask) and task.checkpoint else 0
            for i, (pos, item) in enumerate(self.spec.items[start:], start):
                yield i, pos, item, None
            return
        keep_order = isinstance(self.spec.task, OptimizeTask) and self.spec.task.keep_order
        i = 0
        last = -2  # the position of the last input taken (none yet: no batch continues it)
        while True:
            payload = work.get()
            if payload is None:
                return
            batch = pickle.loads(payload)  # the feeder sends batches of inputs
            if keep_order and len(batch) and batch[0][0] != last + 1:
                self.batch_starts.add(batch[0][0])
            for pos, item in batch:
                yield i, pos, item, None
                i += 1
                last = pos

    def call(self, pos: int, item: Any, fetched: Future[Any] | None, *args: Any, **kwargs: Any) -> Iterable[Any]:
        """The samples ``fn`` produces for one input (none, one, or what a generator yields)."""
        local: list[Path] = []
        try:
            if self.inputs.active:
                item_in, local = self.inputs.prepare(pos, item, fetched)
                result = self.spec.fn(item_in, *args, **kwargs)
            else:
                result = self.spec.fn(item, *args, **kwargs)
        except Exception as err:
            _remove(local)
            raise FnFailed(pos, item, traceback.format_exc()) from err
        if type(result) is GeneratorType:
            return self._drain(pos, item, result, local)
        if local:
            _remove(local)
        return () if result is None else (result,)

    @staticmethod
    def _drain(pos: int, item: Any, samples: Iterator[Any], local: list[Path]) -> Iterator[Any]:
        try:
            for sample in samples:
                if sample is not None:
                    yield sample
        except FnFailed:
            raise
        except Exception as err:
            raise FnFailed(pos, item, traceback.format_exc()) from err
        finally:
            _remove(local)

    # -- optimize -------------------------------------------------------------------------------
    def optimize(self, task: OptimizeTask, work: Any) -> Done:
        spec = self.spec
        state = task.checkpoint or WorkerCheckpoint(spec.rank, next_chunk_index=task.chunk_index)
        if not state.chunks and state.next_input == 0:  # nothing published yet: start after the existing chunks
            state.next_chunk_index = task.chunk_index
        writer = BinaryWriter.from_options(
            spec.staging, task.writer, task.encryption, rank=spec.rank, chunk_index=state.next_chunk_index
        )
        writer.resume(
            [ChunkInfo.from_json(c, f"{state.key}: chunks[{n}]") for n, c in enumerate(state.chunks)],
            state.writer or {},  # a checkpoint of an older version has none: boundaries as the writer finds them
            f"{state.key}: writer",
        )
        published = len(writer.chunks)
        first_chunk = state.next_chunk_index - published
        sample_no = state.next_sample
        skip = state.skip_samples
        keys = self._resumed_keys(state) if task.key_fn is not None else []
        keyed = [published, len(keys)]  # chunks whose keys are in the output, and how many keys they hold

        def checkpoint(next_input: int, skip_samples: int) -> None:
            if task.checkpoint is None:
                return
            if task.key_fn is not None:  # each published chunk's keys, kept for a resumed run's key index
                for chunk in writer.chunks[keyed[0] :]:
                    end = keyed[1] + chunk.chunk_size
                    self.publisher.put_json(chunk_keys_name(chunk.filename), keys[keyed[1] : end])
                    keyed[:] = [keyed[0] + 1, end]
            state.next_input, state.skip_samples, state.next_sample = next_input, skip_samples, sample_no
            state.next_chunk_index = first_chunk + len(writer.chunks)
            state.chunks = [c.to_json() for c in writer.chunks]
            state.config = writer.index_config()
            state.writer = writer.resume_state()
            self.publisher.put_json(state.key, asdict(state))

        chunk_inputs: list[int] = []  # per chunk this run writes, the position of its first sample's input
        opened: int | None = None  # that position for the chunk being filled

        for i, pos, item, fetched in self.inputs.ahead_of(self.numbered_inputs(work)):
            if task.keep_order and pos in self.batch_starts:
                self.batch_starts.discard(pos)
                written = writer.end_chunk()  # the chunks of one run of inputs hold no other inputs
                if written is not None:
                    chunk_inputs.append(pos if opened is None else opened)
                    published += 1
                    self.publisher.put_file(Path(written))
                opened = None
            for j, sample in enumerate(self.call(pos, item, fetched)):
                if skip:
                    skip -= 1
                    continue
                if task.key_fn is not None:
                    try:
                        keys.append(normalize_key(task.key_fn(sample)))
                    except Exception as err:
                        raise FnFailed(pos, item, traceback.format_exc(), refused=True) from err
                try:
                    written = writer.add_item(sample_no, sample)
                except Exception as err:
                    if _write_failure(err, spec) is not None:
                        raise  # the chunk could not be written: the sample is not to blame
                    raise FnFailed(pos, item, traceback.format_exc(), refused=True) from err
                if written is not None:
                    chunk_inputs.append(pos if opened is None else opened)
                    opened = None
                if opened is None:
                    opened = pos
                if written is not None:
                    published += 1
                    self.publisher.put_file(written)
                    checkpoint(i, j)
                sample_no += 1
            skip = 0
            self.done_inputs += 1
            self.report()
        if writer.end_chunk() is not None and opened is not None:
            chunk_inputs.append(opened)
        index = writer.finish()
        for chunk in index.chunks[published:]:
            self.publisher.put_file(Path(spec.staging) / chunk.filename, now=True)
        if spec.items is not None:
            checkpoint(len(spec.items), 0)
        self.publisher.close()
        summary = {"samples": sample_no, "chunks": len(index.chunks)}
        keys_out = keys if task.key_fn is not None else None
        return Done(spec.rank, summary, index, keys_out, chunk_inputs if task.keep_order else None)

    def _resumed_keys(self, state: WorkerCheckpoint) -> list[str | int]:
        """The keys of the samples in the chunks a killed run already published."""
        keys: list[str | int] = []
        for chunk in state.chunks:
            name = chunk_keys_name(chunk["filename"])
            found = self.spec.output.read_json(name)
            if not isinstance(found, list):
                raise RuntimeError(
                    f"{self.spec.output.url_for(name)} is missing: the interrupted run did not keep the keys of "
                    f"{chunk['filename']} (did it run without key_fn?); pass mode='overwrite' to start over"
                )
            keys.extend(found)  # pyright: ignore[reportUnknownArgumentType]
        return keys

    # -- map ------------------------------------------------------------------------------------
    def map(self, work: Any) -> Done:
        spec = self.spec
        params = _parameters(spec.fn)
        files = 0
        for i, pos, item, fetched in self.inputs.ahead_of(self.numbered_inputs(work)):
            # fn writes into a fresh folder of its own (as upstream's temporary one); what it wrote is
            # published as a whole file each, so a killed job leaves no half-written file in the output
            out_dir = Path(spec.staging) / f"map-{pos}"
            out_dir.mkdir(parents=True, exist_ok=True)
            kwargs: dict[str, Any] = {}
            if "is_last" in params:
                kwargs["is_last"] = spec.items is not None and i == len(spec.items) - 1
            if "device" in params:
                kwargs["device"] = _device(spec.rank)
            for _ in self.call(pos, item, fetched, str(out_dir), **kwargs):
                raise FnFailed(pos, item, "map's fn must write its files into output_dir and return None")
            for path in sorted(p for p in out_dir.rglob("*") if p.is_file()):
                self.publisher.put_file(path, str(path.relative_to(out_dir)).replace(os.sep, "/"))
                files += 1
            self.publisher.after(functools.partial(shutil.rmtree, out_dir, ignore_errors=True))
            self.done_inputs += 1
            self.report()
        self.publisher.close()
        return Done(spec.rank, {"files": files})


def _remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _parameters(fn: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def _device(rank: int) -> str | None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return f"cuda:{rank % torch.cuda.device_count()}"
    return None


def _set_environ(env: dict[str, str]) -> None:
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def run_spec(spec: WorkerSpec, events: Any, work: Any) -> Done | Failed:
    """Run one worker's job in this process; what it did (:class:`Done`) or why it failed (:class:`Failed`).

    Progress goes to ``events`` as it happens; nothing raises, so the caller decides what a failure ends.
    """
    worker: _Worker | None = None
    try:
        worker = _Worker(spec, events)
        task = spec.task
        done = worker.optimize(task, work) if isinstance(task, OptimizeTask) else worker.map(work)
        worker.report(force=True)
        return done
    except FnFailed as failure:
        trace_crash(failure.__cause__ or failure, worker=spec.rank, position=failure.pos)
        if worker is not None:
            worker.publisher.abort()
        return Failed(spec.rank, failure.headline(spec.rank), failure.pos, failure.item, failure.text)
    except BaseException as err:
        trace_crash(err, worker=spec.rank)
        if worker is not None:
            worker.publisher.abort()
        text = traceback.format_exc()
        headline = _write_failure(err, spec) or f"worker {spec.rank} failed: {_last_line(text)}"
        return Failed(spec.rank, headline, None, None, text)


class _Pipe:
    """The write end of this worker's pipe to the parent, as the ``events`` a worker puts its events on.

    A send writes the pickled event in this thread: unlike a ``multiprocessing.Queue``'s, no feeder
    thread has to start before the parent hears anything.
    """

    def __init__(self, connection: Any) -> None:
        self.put = connection.send


def worker_main(spec: WorkerSpec, connection: Any, work: Any, environ: dict[str, str]) -> None:
    """Entry point of a worker process; ``connection`` is its pipe to the parent, ``environ`` the parent's."""
    freeze_inherited()  # what it inherited or imported before the job goes out of the collector's reach
    declare_worker()  # it uploads and downloads, and forks nothing: obstore runs here, not in a helper
    torch = sys.modules.get("torch")
    if torch is not None:
        # What torch's DataLoader workers do: the workers share the cores, and a pool forked from a
        # parent that used its OpenMP threads must not start a parallel region in the child.
        torch.set_num_threads(1)
    _set_environ({**environ, **spec.env})
    if not trace_enabled("crash") and (read_text("LITDATA_TRACE_LEVEL") or read_text("LITDATA_TRACE_CATEGORIES")):
        # A forkserver child imported litdata_io before the job's environment (enable_tracer's) arrived.
        enable_tracer()
    result = run_spec(spec, _Pipe(connection), work)
    connection.send(result)
    connection.close()
    if isinstance(result, Failed):
        sys.exit(1)
    gc.freeze()  # the OS reclaims it all: keep the interpreter's exit from walking every object
