"""What ``optimize`` and ``map`` share.

The checks before any worker starts, and the :class:`Job` that splits this node's inputs
between its workers, describes the workers and runs them.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import pickle
import pickletools
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

from litdata_io import Dir, resolve_dir
from litdata_prep._engine import default_start_method, run_workers
from litdata_prep._nodes import NodeInfo, check_node_request, detect_nodes
from litdata_prep._output import Output
from litdata_prep._plan import InputStream, Numbered, batched, file_sizes, limit_for_dev_run, node_share, worker_slices
from litdata_prep._ray import RayExecutor, ray_executor
from litdata_prep._streaming_inputs import streaming_inputs
from litdata_prep._worker import Done, MapTask, OptimizeTask, WorkerSpec

__all__ = [
    "Job",
    "MapRequest",
    "OptimizeRequest",
    "PrepRequest",
    "call_name",
    "check_knobs",
    "prepare_items",
    "check_inputs",
    "check_spawnable",
    "default_num_workers",
    "describe",
    "make_staging",
    "open_output",
    "remove_staging",
    "resolve_start_method",
]

_READ_ONLY_SCHEMES = ("http://", "https://", "hf://")


def default_num_workers(num_workers: int | None) -> int:
    """``num_workers`` checked; None means one per CPU, 0 means 1 (upstream's rule)."""
    if num_workers is None:
        return os.cpu_count() or 1
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
        raise ValueError(f"num_workers must be a non-negative int, got {num_workers!r}")
    return max(1, num_workers)


_WARNED: set[str] = set()


def check_knobs(what: str, num_downloaders: Any, optimize_dns: Any, broadcast_paths: Any, num_nodes: int) -> int:
    """Check upstream's I/O knobs; return the downloads each worker runs ahead of ``fn`` (default 2).

    ``optimize_dns`` and, across machines, ``broadcast_paths`` have nothing to act on here: each
    is warned about once per process, with the reason.
    """
    if num_downloaders is None:
        num_downloaders = 2  # upstream's default
    if not isinstance(num_downloaders, int) or isinstance(num_downloaders, bool) or num_downloaders < 0:
        raise ValueError(f"{what}: num_downloaders must be a non-negative int, got {num_downloaders!r}")
    if optimize_dns:
        _warn_once(
            "optimize_dns",
            f"{what}: optimize_dns=True is ignored: upstream uses it to rewrite /etc/resolv.conf on Lightning "
            "Studio machines (with sudo); litdata never changes the system's DNS settings",
        )
    if broadcast_paths and num_nodes > 1:
        _warn_once(
            "broadcast_paths",
            f"{what}: broadcast_paths=True is ignored: the nodes of a litdata job share no channel before it "
            "starts, so each node expands {%...} date templates of input_dir/output_dir itself; give an "
            "explicit path (or a day-level template) so every node resolves the same one",
        )
    return num_downloaders


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, UserWarning, stacklevel=5)  # the caller of optimize/map (via Job.prepare)


def resolve_start_method(start_method: str | None) -> str:
    """The start method of worker processes; by default ``fork`` in a notebook, ``forkserver`` on Linux, else ``spawn``.

    A notebook's functions cannot be imported by other processes, so it forks (as upstream does).
    Elsewhere, the arguments are checked by the rules of upstream's ``spawn`` (a process that loads the
    script under ``__mp_main__``); on Linux the workers are then forked from this process when no other
    thread runs in it, else from a ``forkserver``, decided when they start (:func:`default_start_method`).
    """
    if start_method is None:
        if "ipykernel" in sys.modules:
            return "fork"
        return "forkserver" if sys.platform.startswith("linux") else "spawn"
    if start_method not in mp.get_all_start_methods():
        raise ValueError(
            f"start_method={start_method!r} is not available here; choose from {mp.get_all_start_methods()}"
        )
    return start_method


def check_inputs(inputs: Any, what: str) -> Sequence[Any]:
    """``inputs`` as a sequence (a list, tuple or range as given; other sequences as a list); it must not be empty.

    Raises:
        ValueError: ``inputs`` is empty, a string, or not a sequence.
    """
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        hint = " (pass list(...) of it, or feed a multiprocessing queue)" if hasattr(inputs, "__iter__") else ""
        raise ValueError(
            f"{what}: The provided inputs should be a non-empty sequence: inputs must be a sequence such as a list, "
            f"a range or a generator, got {type(inputs).__name__}{hint}"
        )
    if len(inputs) == 0:
        raise ValueError(f"{what}: The provided inputs should be non empty. Found []: there is nothing to process")
    # A list, tuple or range is used as it is (a range of 10M inputs stays a range); other sequences
    # are copied once, so the workers get a plain list whatever the user's type pickles as.
    return inputs if isinstance(inputs, (list, tuple, range)) else list(inputs)


def _peeked(inputs: Iterator[Any], what: str) -> Iterator[Any]:
    """``inputs`` again, after checking it yields something."""
    try:
        first = next(inputs)
    except StopIteration:
        raise ValueError(f"{what}: The provided inputs should be non empty: the iterator yielded nothing") from None
    return itertools.chain((first,), inputs)


def _pickled_modules(data: bytes) -> set[str]:
    """The modules a pickle imports when it is loaded."""
    modules: set[str] = set()
    strings: list[str] = []  # string pushes, most recent last (STACK_GLOBAL takes the last two)
    memo: dict[int, str | None] = {}
    last: str | None = None  # the string just pushed, if the previous opcode pushed one
    for opcode, arg, _ in pickletools.genops(data):
        pushed: str | None = None
        if opcode.name == "GLOBAL" and isinstance(arg, str):
            modules.add(arg.split(" ", 1)[0])
        elif opcode.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE") and isinstance(arg, str):
            pushed = arg
        elif opcode.name == "MEMOIZE":
            memo[len(memo)] = last
            pushed = last
        elif opcode.name in ("BINPUT", "LONG_BINPUT", "PUT") and isinstance(arg, int):
            memo[arg] = last
            pushed = last
        elif opcode.name in ("BINGET", "LONG_BINGET", "GET") and isinstance(arg, int):
            pushed = memo.get(arg)
        elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
            modules.add(strings[-2])
        if pushed is not None and opcode.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"):
            strings.append(pushed)
        last = pushed
    return modules


def _importable_elsewhere(module: str) -> str | None:
    """None if a fresh interpreter could import ``module``, else why not."""
    if module == "__mp_main__" and sys.modules.get("__mp_main__") is not None:
        # A process importing the script for its workers (a forkserver or a spawned child) reached
        # optimize/map: the script calls it at import time.
        return (
            "the script calls optimize/map when it is imported (no `if __name__ == '__main__':` guard), "
            "and worker processes import the script again"
        )
    if module in ("__main__", "__mp_main__"):
        main = sys.modules.get("__main__")
        if getattr(main, "__file__", None) is None and getattr(main, "__spec__", None) is None:
            return "it is defined in an interactive session or `python -c`, which worker processes cannot import"
        return None
    top = module.split(".", 1)[0]
    if top in sys.builtin_module_names:
        return None
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            if find_spec(top, None) is not None:
                return None
        except Exception:
            continue
    return f"its module {module!r} cannot be imported from sys.path (it was loaded some other way)"


def check_spawnable(name: str, obj: Any, start_method: str) -> None:
    """Make sure ``obj`` reaches spawned workers: it pickles, and the modules it needs import there."""
    if obj is None or start_method == "fork":
        return
    fix = (
        f"define {name} at the top level of an importable module or script (not a lambda, not a nested "
        "function), call optimize/map under `if __name__ == '__main__':`, or pass start_method='fork'"
    )
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:
        raise TypeError(
            f"{name} {describe(obj)} cannot be sent to {start_method} worker processes: {err}. Fix: {fix}"
        ) from None
    for module in sorted(_pickled_modules(data)):
        reason = _importable_elsewhere(module)
        if reason is not None:
            raise TypeError(
                f"{name} {describe(obj)} cannot be loaded in {start_method} worker processes: {reason}. Fix: {fix}"
            )


def describe(obj: Any) -> str:
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{qualname}"


def open_output(output_dir: str | os.PathLike[str] | Dir, storage_options: dict[str, Any] | None, what: str) -> Output:
    """Resolve ``output_dir`` (expanding ``{%...}`` date templates) and check it can be written."""
    if output_dir is None:
        raise ValueError(f"{what}: output_dir is required")
    location = resolve_dir(output_dir)
    if location.url is not None and location.url.startswith("local:"):
        location = Dir(path=location.url[len("local:") :], url=None)
    if location.url is not None and location.url.startswith(_READ_ONLY_SCHEMES):
        raise ValueError(f"{what}: output_dir {location.url} is read-only; write to a local folder or a bucket URL")
    output = Output(location, storage_options)
    output.check_writable()
    return output


def make_staging(output: Output, node_rank: int, what: str) -> Path:
    """A fresh local folder for this node's unpublished files.

    Inside the output folder when it is local (so publishing a chunk is a rename), else in the
    temporary directory.
    """
    if output.is_remote:
        _remove_orphaned_staging()
        return Path(tempfile.mkdtemp(prefix=f"litdata-{what}-{os.getpid()}-"))
    remove_staging(output, node_rank)  # left by a run that was killed
    staging = output.local_path / f".litdata-staging-{node_rank}"
    staging.mkdir(parents=True)
    return staging


# A staging folder in the temporary directory: ``litdata-{what}-{pid of the job}-{random}``.
_TEMP_STAGING = re.compile(r"^litdata-(?:optimize|map)-(\d+)-")


def _remove_orphaned_staging() -> None:
    """Remove the temporary staging folders of jobs that were killed (their process is gone)."""
    for path in Path(tempfile.gettempdir()).glob("litdata-*"):
        match = _TEMP_STAGING.match(path.name)
        if match and path.is_dir() and not _alive(int(match[1])):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_staging(output: Output, node_rank: int) -> None:
    """Remove the local staging folder a killed run left in the output folder (if any)."""
    if not output.is_remote:
        shutil.rmtree(output.local_path / f".litdata-staging-{node_rank}", ignore_errors=True)


def call_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def prepare_items(
    what: str,
    inputs: Any,
    batch_size: int | None,
    reader: Any,
    weights: list[int] | None,
    num_workers: int,
    input_dir: Dir | None,
    reorder_files: bool,
    stream: bool,
) -> tuple[Sequence[Any] | InputStream, list[int] | None]:
    """The work items (batched, remapped by ``reader``) and their weights, checked.

    Args:
        what: ``"optimize"`` or ``"map"``, for messages.
        inputs: the user's inputs.
        batch_size: group inputs into lists of this many.
        reader: a reader whose ``remap_items`` reshapes the inputs (e.g. Parquet row groups).
        weights: one positive weight per input, or None.
        num_workers: workers on this machine (readers split work by it).
        input_dir: the resolved ``input_dir``; with a local path and ``reorder_files``, inputs
            are weighted by the size of the files they name.
        reorder_files: weight inputs by file size.
        stream: an iterator may stay one (the job feeds one shared queue, in arrival order); else
            it is read into a list first.
    """
    if isinstance(inputs, Iterator) and not isinstance(inputs, Sequence):
        checked = _peeked(cast("Iterator[Any]", inputs), what)
        local_files = reorder_files and input_dir is not None and input_dir.path
        if stream and reader is None and weights is None and not local_files:
            return InputStream(checked, batch_size), None
        inputs = list(checked)  # slices, weights or a reader need the whole list
    items = check_inputs(inputs, what)
    if batch_size is not None and batch_size > 1:
        items = batched(items, batch_size)
    if weights is not None and (len(weights) != len(items) or any(w <= 0 for w in weights)):
        raise ValueError(
            f"The provided weights length should match the inputs' length. {what}: weights needs one positive "
            f"number per input ({len(items)}), got {len(weights)}"
        )
    if reader is not None:
        items = check_inputs(reader.remap_items(items, num_workers), f"{what} (after reader.remap_items)")
    if weights is None and reorder_files and input_dir is not None and input_dir.path and items:
        weights = file_sizes(items, input_dir.path)
    return items, weights


_Request = TypeVar("_Request", bound="PrepRequest")
T = TypeVar("T")


@dataclass(frozen=True)
class PrepRequest:
    """The arguments ``optimize`` and ``map`` share, as the caller gave them: one value, built once.

    :meth:`from_call` takes them from the public function's ``locals()`` on entry, so the public
    signature is the only list of them; :meth:`Job.prepare` checks them. Subclasses add each
    job's own arguments and name the job (``what``) in messages.
    """

    fn: Callable[..., Any]
    inputs: Any
    output_dir: str | os.PathLike[str] | Dir
    input_dir: str | os.PathLike[str] | None
    weights: list[int] | None
    num_workers: int | None
    fast_dev_run: bool | int
    num_nodes: int | None
    machine: Any
    num_downloaders: int | None
    num_uploaders: int | None
    reorder_files: bool
    reader: Any
    batch_size: int | None
    start_method: str | None
    optimize_dns: bool | None
    storage_options: dict[str, Any] | None
    keep_data_ordered: bool | None
    broadcast_paths: bool
    verbose: bool
    executor: Any
    #: The job's name in messages.
    what: ClassVar[str] = "prep"

    @classmethod
    def from_call(cls: type[_Request], arguments: Mapping[str, Any]) -> _Request:
        """The request made of the public function's arguments (its ``locals()`` on entry)."""
        return cls(**{f.name: arguments[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class OptimizeRequest(PrepRequest):
    """``optimize``'s arguments (see its docstring)."""

    queue: Any
    chunk_size: int | None
    chunk_bytes: int | str | None
    align_chunking: bool
    compression: str | None
    compression_level: str | None
    compression_batch_size: int | None
    encryption: Any
    mode: str | None
    use_checkpoint: bool
    item_loader: Any
    key_fn: Callable[[Any], Any] | None
    what: ClassVar[str] = "optimize"


@dataclass(frozen=True)
class MapRequest(PrepRequest):
    """``map``'s arguments (see its docstring)."""

    error_when_not_empty: bool
    what: ClassVar[str] = "map"


@dataclass(frozen=True)
class Job:
    """One run of ``optimize`` or ``map`` on this node, its arguments checked (:meth:`prepare`).

    Attributes:
        request: the caller's arguments.
        nodes: this machine's place among the job's machines.
        num_workers: worker processes on this machine.
        start_method: how they are started.
        items: every node's work items (batched and remapped), in order; empty when fed by a queue;
            an :class:`InputStream` for an iterator fed to one node's shared queue.
        weights: one weight per item to balance the workers, or None.
        limit: ``fast_dev_run``'s inputs per worker, or None for all.
        reader: applied by the workers to each input.
        input_dir: a remote input folder whose files the workers download, else None.
        downloaders: inputs whose files each worker downloads ahead of ``fn`` (``num_downloaders``).
        output: where the results go.
        ray: the Ray cluster that runs the workers (``executor="ray"``), or None for processes here.
    """

    request: PrepRequest
    nodes: NodeInfo
    num_workers: int
    start_method: str
    items: Sequence[Any] | InputStream
    weights: list[int] | None
    limit: int | None
    reader: Any
    input_dir: Dir | None
    downloaders: int
    output: Output
    ray: RayExecutor | None = None

    @property
    def what(self) -> str:
        """``"optimize"`` or ``"map"``, for messages."""
        return self.request.what

    @classmethod
    def prepare(
        cls,
        request: PrepRequest,
        spawnable: Mapping[str, Any] | None = None,
        queue: bool = False,
        ordered: bool = False,
    ) -> Job:
        """Check the arguments both jobs take, in the order a user fixes them, and open the output.

        Args:
            request: the caller's arguments.
            spawnable: other arguments the workers must be able to load, by name (for messages).
            queue: the inputs come from the user's queue (``request.inputs`` is not used).
            ordered: the workers take static ordered slices (an iterator of inputs is read into a list).
        """
        r, kind = request, request.what
        fn, reader, weights, batch_size = r.fn, r.reader, r.weights, r.batch_size
        if not callable(fn):
            raise TypeError(f"{kind}: fn must be callable, got {fn!r}")
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"{kind}: batch_size must be a positive int, got {batch_size!r}")
        inputs = r.inputs
        if not queue and inputs is not None:
            inputs, reader = streaming_inputs(kind, inputs, batch_size, reader, weights)
        if reader is not None and weights is not None:
            raise ValueError(f"{kind}: give reader or weights, not both")
        nodes = detect_nodes()
        ray = ray_executor(r.executor, kind, r.num_nodes, r.machine)
        if ray is None:  # num_nodes/machine without a Ray cluster: a multi-node launch must give them
            check_node_request(r.num_nodes, r.machine, nodes)
        if ray is not None and nodes.num_nodes > 1:
            raise ValueError(
                f"{kind}: executor='ray' runs the whole job from one driver, but the environment ({nodes.source}) "
                f"says this process is node {nodes.node_rank} of {nodes.num_nodes}; start the script once, on the "
                "Ray cluster, without DATA_OPTIMIZER_NUM_NODES/torchrun/SLURM node variables"
            )
        downloaders = check_knobs(kind, r.num_downloaders, r.optimize_dns, r.broadcast_paths, nodes.num_nodes)
        if ray is not None:  # num_workers is per node with num_nodes
            workers = (
                ray.default_workers()
                if r.num_workers is None
                else ray.total_workers(default_num_workers(r.num_workers))
            )
        else:
            workers = default_num_workers(r.num_workers)
        method = resolve_start_method(r.start_method)
        if ray is None:  # Ray ships functions by value (cloudpickle): no import check applies
            for name, value in {"fn": fn, "reader": reader, **(spawnable or {})}.items():
                check_spawnable(name, value, method)
        resolved = resolve_dir(r.input_dir) if r.input_dir is not None else None
        items: Sequence[Any] | InputStream = []
        if not queue:
            stream = not ordered and ray is None and nodes.num_nodes == 1
            items, weights = prepare_items(
                kind, inputs, batch_size, reader, weights, workers, resolved, r.reorder_files, stream
            )
        output = open_output(r.output_dir, r.storage_options, kind)
        return cls(
            request=request,
            nodes=nodes,
            num_workers=workers,
            start_method=method,
            items=items,
            weights=weights,
            limit=limit_for_dev_run(r.fast_dev_run),
            reader=reader,
            input_dir=resolved if resolved is not None and resolved.url else None,
            downloaders=downloaders,
            output=output,
            ray=ray,
        )

    @property
    def ranks(self) -> list[int]:
        """The global ranks of this node's workers (they name chunk files)."""
        return [self.nodes.node_rank * self.num_workers + w for w in range(self.num_workers)]

    @property
    def listed(self) -> Sequence[Any]:
        """The items, for the ways of running that need them all (never an :class:`InputStream` there)."""
        if isinstance(self.items, InputStream):
            raise TypeError(f"{self.what}: this way of running needs the inputs as a sequence, not an iterator")
        return self.items

    def ordered_slices(self, align: int | None = None) -> list[Numbered]:
        """One static, ordered slice of inputs per worker of this node (``fast_dev_run`` applied)."""
        nodes = self.nodes
        slices = worker_slices(self.listed, self.num_workers, nodes.num_nodes, nodes.node_rank, self.weights, align)
        return [s[: self.limit] for s in slices] if self.limit else slices

    def shared_inputs(self) -> Numbered | InputStream:
        """This node's inputs for its workers' shared queue (``fast_dev_run`` applied)."""
        if isinstance(self.items, InputStream):
            return self.items.limited(self.limit)
        shared = node_share(self.items, self.nodes.num_nodes, self.nodes.node_rank, self.weights)
        return shared[: self.limit] if self.limit else shared

    def cluster_inputs(self) -> Sequence[Any]:
        """Every input, for one driver feeding a whole cluster (``fast_dev_run`` applied to all its workers)."""
        items = self.listed
        return items[: self.limit * self.num_workers] if self.limit else items

    def worker_specs(
        self, staging: Path, slices: list[Numbered] | None, task: Callable[[int], OptimizeTask | MapTask]
    ) -> list[WorkerSpec]:
        """Each worker's spec (its task from ``task(rank)``), and its own staging folder inside ``staging``."""
        specs = []
        for w, rank in enumerate(self.ranks):
            folder = staging / f"rank-{rank}"
            folder.mkdir()
            specs.append(self.spec(rank, str(folder), slices[w] if slices is not None else None, task(rank)))
        return specs

    def spec(self, rank: int, staging: str, items: Numbered | None, task: OptimizeTask | MapTask) -> WorkerSpec:
        """The spec of worker ``rank`` doing ``task`` on ``items`` (None: the shared queue)."""
        return WorkerSpec(
            task=task,
            fn=self.request.fn,
            rank=rank,
            staging=staging,
            output=self.output,
            items=items,
            reader=self.reader,
            input_dir=self.input_dir,
            storage_options=dict(self.request.storage_options or {}),
            upload_threads=self.request.num_uploaders or 2,
            downloaders=self.downloaders,
            env=self.nodes.worker_env(rank, self.num_workers),
        )

    def run(
        self,
        specs: list[WorkerSpec],
        shared: Numbered | InputStream | None,
        total: int | None,
        then: Callable[[dict[int, Done]], T],
        source: Any = None,
    ) -> T:
        """Run the workers (fed ``shared`` or the user's queue ``source``) to the end; what ``then`` returns.

        ``then`` gets what each rank reported and runs while the worker processes exit (:func:`run_workers`).
        """
        verbose, method, why = self.request.verbose, self.start_method, "as asked"
        if self.request.start_method is None:
            why = "the default"
            if method == "forkserver":  # decided now: what runs in this process when the workers start
                method, why = default_start_method()
        if verbose:
            what = f"{total} inputs" if total is not None else "inputs from an iterator or a queue"
            print(
                f"{self.what}: {what} on {self.num_workers} {method} workers ({why}) -> {self.output.display}",
                flush=True,
            )
        return run_workers(
            specs, method, then, shared=shared, source=source, total=total, verbose=verbose, desc=self.what
        )
