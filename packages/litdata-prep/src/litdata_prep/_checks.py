"""Every check of ``optimize``'s and ``map``'s arguments, in one place, before any worker starts.

:func:`prepare_optimize` and :func:`prepare_map` take the public function's arguments as given
(its ``locals()`` on entry, so the public signature is the only list of them), check them in
the order a user fixes them, open the output and return a :class:`~litdata_prep._job.Job` of
resolved values: nothing after them reads an argument as the caller gave it.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import multiprocessing.queues
import os
import pickle
import pickletools
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from litdata_format.internal import WriterOptions, check_writer_options
from litdata_io import Dir, resolve_dir
from litdata_prep._inputs import InputStream, batched, file_sizes, limit_for_dev_run
from litdata_prep._job import Job, OptimizeJob
from litdata_prep._nodes import check_node_request, detect_nodes
from litdata_prep._output import Output
from litdata_prep._ray.executor import ray_executor
from litdata_prep._staging import is_staged
from litdata_prep._streaming_inputs import streaming_inputs

__all__ = ["check_knobs", "open_output", "prepare_map", "prepare_optimize"]

_READ_ONLY_SCHEMES = ("http://", "https://", "hf://")


def _count(what: str, name: str, value: Any) -> int:
    """``value`` of the argument ``name``, checked to be a non-negative int."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{what}: {name} must be a non-negative int, got {value!r}")
    return value


_WARNED: set[str] = set()


def check_knobs(what: str, num_downloaders: Any, optimize_dns: Any, broadcast_paths: Any, num_nodes: int) -> int:
    """Check upstream's I/O knobs; return the downloads each worker runs ahead of ``fn`` (default 2).

    ``optimize_dns`` and, across machines, ``broadcast_paths`` have nothing to act on here: each
    is warned about once per process, with the reason.
    """
    num_downloaders = 2 if num_downloaders is None else _count(what, "num_downloaders", num_downloaders)  # upstream: 2
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
        warnings.warn(message, UserWarning, stacklevel=5)  # the caller of optimize/map (via _prepare)


def _resolve_start_method(start_method: str | None) -> str:
    """The start method of worker processes; by default ``fork`` in a notebook, ``forkserver`` on Linux, else ``spawn``.

    A notebook's functions cannot be imported by other processes, so it forks (as upstream does).
    Elsewhere the arguments are checked by ``spawn``'s rules; on Linux whether the workers fork or use
    a forkserver is decided when they start (:func:`default_start_method`).
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


def _check_inputs(inputs: Any, what: str) -> Sequence[Any]:
    """``inputs`` as a non-empty sequence (a list, tuple or range as given; other sequences as a list)."""
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        hint = " (pass list(...) of it, or feed a multiprocessing queue)" if hasattr(inputs, "__iter__") else ""
        raise ValueError(
            f"{what}: The provided inputs should be a non-empty sequence: inputs must be a sequence such as a list, "
            f"a range or a generator, got {type(inputs).__name__}{hint}"
        )
    if len(inputs) == 0:
        raise ValueError(f"{what}: The provided inputs should be non empty. Found []: there is nothing to process")
    # A range of 10M inputs stays a range; other sequences become a list, whatever their type pickles as.
    return inputs if isinstance(inputs, (list, tuple, range)) else list(inputs)


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
        with contextlib.suppress(Exception):  # a finder without find_spec, or one that fails
            if finder.find_spec(top, None) is not None:
                return None
    return f"its module {module!r} cannot be imported from sys.path (it was loaded some other way)"


def _check_spawnable(name: str, obj: Any, start_method: str) -> None:
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
            f"{name} {_describe(obj)} cannot be sent to {start_method} worker processes: {err}. Fix: {fix}"
        ) from None
    for module in sorted(_pickled_modules(data)):
        reason = _importable_elsewhere(module)
        if reason is not None:
            raise TypeError(
                f"{name} {_describe(obj)} cannot be loaded in {start_method} worker processes: {reason}. Fix: {fix}"
            )


def _describe(obj: Any) -> str:
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{qualname}"


def open_output(output_dir: str | os.PathLike[str] | Dir, storage_options: dict[str, Any] | None, what: str) -> Output:
    """Resolve ``output_dir`` (expanding ``{%...}`` date templates) and check it can be written."""
    if output_dir is None:
        raise ValueError(f"{what}: output_dir is required")
    output = Output.at(output_dir, storage_options)
    if output.url.startswith(_READ_ONLY_SCHEMES):
        raise ValueError(f"{what}: output_dir {output.url} is read-only; write to a local folder or a bucket URL")
    output.check_writable()
    return output


def _prepare_items(
    what: str,
    inputs: Any,
    batch_size: int | None,
    reader: Any,
    weights: list[int] | None,
    num_workers: int,
    sized_by: str | None,
    stream: bool,
) -> tuple[Sequence[Any] | InputStream, list[int] | None]:
    """The work items (batched, remapped by ``reader``) and their weights, checked.

    Without ``weights``, each input weighs its files under ``sized_by``. With ``stream`` an iterator stays one.
    """
    if isinstance(inputs, Iterator) and not isinstance(inputs, Sequence):
        try:
            first = next(inputs)
        except StopIteration:
            raise ValueError(f"{what}: The provided inputs should be non empty: the iterator yielded nothing") from None
        checked = itertools.chain((first,), cast("Iterator[Any]", inputs))
        if stream and reader is None and weights is None and not sized_by:
            return InputStream(checked, batch_size), None
        inputs = list(checked)  # slices, weights or a reader need the whole list
    items = _check_inputs(inputs, what)
    if batch_size is not None and batch_size > 1:
        items = batched(items, batch_size)
    if weights is not None and (len(weights) != len(items) or any(w <= 0 for w in weights)):
        raise ValueError(
            f"The provided weights length should match the inputs' length. {what}: weights needs one positive "
            f"number per input ({len(items)}), got {len(weights)}"
        )
    if reader is not None:
        items = _check_inputs(reader.remap_items(items, num_workers), f"{what} (after reader.remap_items)")
    if weights is None and sized_by and items:
        weights = file_sizes(items, sized_by)
    return items, weights


def prepare_optimize(a: Mapping[str, Any]) -> OptimizeJob:
    """``optimize``'s arguments ``a`` (its ``locals()``) checked, as the job to run."""
    queue, key_fn, mode = a["queue"], a["key_fn"], a["mode"]
    use_checkpoint, align = a["use_checkpoint"], a["align_chunking"]
    if key_fn is not None and not callable(key_fn):
        raise TypeError(f"optimize: key_fn must be callable (a sample -> its str or int key), got {key_fn!r}")
    if (queue is None) == (a["inputs"] is None):
        raise ValueError("optimize: give exactly one of inputs (a sequence) or queue (a multiprocessing.Queue)")
    if queue is not None and not isinstance(queue, multiprocessing.queues.Queue):
        raise TypeError(f"optimize: queue must be a multiprocessing.Queue, got {type(queue).__name__}")
    if mode not in (None, "append", "overwrite"):
        raise ValueError(
            f"optimize: The provided `mode` should be either `append` or `overwrite`: mode must be None, 'append' or "
            f"'overwrite', got {mode!r}"
        )
    if ray_executor(a["executor"], "optimize") is not None and (queue is not None or align):
        raise ValueError(
            "optimize: executor='ray' cuts a list of inputs into batches for the cluster's workers; a queue and "
            "align_chunking=True need this machine's worker processes (executor=None)"
        )
    ordered = _ordered(a["keep_data_ordered"], use_checkpoint, align, queue)
    writer = _writer_options(a)
    spawnable = {"key_fn": key_fn, "item_loader": a["item_loader"], "encryption": a["encryption"]}
    return OptimizeJob(
        **_prepare("optimize", a, spawnable, queue is not None, ordered),
        queue=queue,
        writer=writer,
        encryption=a["encryption"],
        key_fn=key_fn,
        mode=mode,
        use_checkpoint=use_checkpoint,
        align=a["chunk_size"] if align else None,
    )


def _writer_options(a: Mapping[str, Any]) -> WriterOptions:
    """The workers' writer options, checked by the writers' own check before any worker starts."""
    chunk_size, chunk_bytes = a["chunk_size"], a["chunk_bytes"]
    if chunk_size is None and chunk_bytes is None:
        chunk_bytes = "64MB"  # upstream's documented default; its graph examples pass neither
    if a["align_chunking"] and chunk_size is None:
        raise ValueError("optimize: align_chunking=True needs chunk_size (chunk boundaries are counted in items)")
    try:
        return check_writer_options(
            chunk_size,
            chunk_bytes,
            a["compression"],
            a["encryption"],
            a["item_loader"],
            a["compression_level"],
            a["compression_batch_size"],
        )
    except (TypeError, ValueError) as err:
        raise type(err)(f"optimize: {err}") from None


def _ordered(keep_data_ordered: bool | None, use_checkpoint: bool, align_chunking: bool, queue: Any) -> bool | None:
    """Whether the workers take static ordered slices; None (the default): yes, unless the inputs are an iterator."""
    if queue is not None:
        if use_checkpoint or align_chunking or keep_data_ordered:
            raise ValueError(
                "optimize: a queue is consumed in arrival order by every worker; use_checkpoint, align_chunking "
                "and keep_data_ordered=True need a static list of inputs"
            )
        return False
    if keep_data_ordered is None:
        return True if use_checkpoint or align_chunking else None
    if not keep_data_ordered and (use_checkpoint or align_chunking):
        need = "use_checkpoint" if use_checkpoint else "align_chunking"
        raise ValueError(f"optimize: {need}=True needs keep_data_ordered=True (static ordered slices per worker)")
    return bool(keep_data_ordered)


def prepare_map(a: Mapping[str, Any]) -> Job:
    """``map``'s arguments ``a`` (its ``locals()``) checked, as the job to run."""
    job = Job(**_prepare("map", a, {}, queue=False, ordered=bool(a["keep_data_ordered"])))
    if a["error_when_not_empty"]:
        found = [k for k in job.output.all_keys() if not is_staged(k)]
        if found:
            raise _NotEmptyError(  # upstream's sentence first: code written for upstream matches it
                f"The provided output_dir `{job.output.url}` already contains data and datasets are meant to be "
                f"immutable. map: it is not empty ({len(found)} files, e.g. {found[:3]}) and "
                "error_when_not_empty=True; choose an empty output_dir"
            )
    return job


class _NotEmptyError(ValueError, RuntimeError):
    """A non-empty output_dir with error_when_not_empty: a ValueError here, upstream's RuntimeError too."""


def _prepare(
    kind: str, a: Mapping[str, Any], spawnable: Mapping[str, Any], queue: bool, ordered: bool | None
) -> dict[str, Any]:
    """The arguments both jobs take, checked in the order a user fixes them, and the opened output: the job's fields.

    ``spawnable`` names other arguments the workers must load; with ``queue`` the inputs come from the user's
    queue. ``ordered``: the workers take static slices; None: slices of a list, an iterator streams.
    """
    fn, reader, weights, batch_size, num_workers = a["fn"], a["reader"], a["weights"], a["batch_size"], a["num_workers"]
    if not callable(fn):
        raise TypeError(f"{kind}: fn must be callable, got {fn!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"{kind}: batch_size must be a positive int, got {batch_size!r}")
    inputs = a["inputs"]
    if not queue and inputs is not None:
        inputs, reader = streaming_inputs(kind, inputs, batch_size, reader, weights)
    if reader is not None and weights is not None:
        raise ValueError(f"{kind}: give reader or weights, not both")
    nodes = detect_nodes()
    ray = ray_executor(a["executor"], kind, a["num_nodes"], a["machine"])
    if ray is None:  # num_nodes/machine without a Ray cluster: a multi-node launch must give them
        check_node_request(a["num_nodes"], a["machine"], nodes)
    if ray is not None and nodes.num_nodes > 1:
        raise ValueError(
            f"{kind}: executor='ray' runs the whole job from one driver, but the environment ({nodes.source}) "
            f"says this process is node {nodes.node_rank} of {nodes.num_nodes}; start the script once, on the "
            "Ray cluster, without DATA_OPTIMIZER_NUM_NODES/torchrun/SLURM node variables"
        )
    downloaders = check_knobs(kind, a["num_downloaders"], a["optimize_dns"], a["broadcast_paths"], nodes.num_nodes)
    # None: one per CPU; 0: one (upstream's rule); per node with Ray's num_nodes
    workers = (os.cpu_count() or 1) if num_workers is None else max(1, _count(kind, "num_workers", num_workers))
    if ray is not None:
        workers = ray.default_workers() if num_workers is None else ray.total_workers(workers)
    method = _resolve_start_method(a["start_method"])
    if ray is None:  # Ray ships functions by value (cloudpickle): no import check applies
        for name, value in {"fn": fn, "reader": reader, **spawnable}.items():
            _check_spawnable(name, value, method)
    input_dir = resolve_dir(a["input_dir"]) if a["input_dir"] is not None else None
    # Why it must know: the workers download the files a URL names; a local folder's files weigh their inputs.
    remote_input = input_dir if input_dir is not None and input_dir.url else None
    sized_by = input_dir.path if input_dir is not None and a["reorder_files"] else None
    items: Sequence[Any] | InputStream = []
    if not queue:
        stream = not ordered and ray is None and nodes.num_nodes == 1
        items, weights = _prepare_items(kind, inputs, batch_size, reader, weights, workers, sized_by, stream)
    output = open_output(a["output_dir"], a["storage_options"], kind)
    return {
        "what": kind,
        "fn": fn,
        "nodes": nodes,
        "num_workers": workers,
        "start_method": method,
        "start_method_given": a["start_method"] is not None,
        "items": items,
        "weights": weights,
        "limit": limit_for_dev_run(a["fast_dev_run"]),
        "reader": reader,
        "input_dir": remote_input,
        "downloaders": downloaders,
        "uploaders": a["num_uploaders"] or 2,
        "output": output,
        "ray": ray,
        "ordered": ordered if ordered is not None else not isinstance(items, InputStream),
        "verbose": a["verbose"],
    }
