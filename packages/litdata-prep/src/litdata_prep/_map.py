"""``map``: run ``fn(input, output_dir)`` over inputs in parallel; the files it writes land in ``output_dir``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

from litdata_io import Dir, resolve_dir
from litdata_prep._engine import run_workers
from litdata_prep._job import (
    check_knobs,
    check_spawnable,
    default_num_workers,
    make_staging,
    open_output,
    prepare_items,
    resolve_start_method,
)
from litdata_prep._nodes import check_node_request, detect_nodes
from litdata_prep._plan import Numbered, limit_for_dev_run, node_share, worker_slices
from litdata_prep._worker import WorkerSpec

__all__ = ["map"]


def map(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    output_dir: str | os.PathLike[str] | Dir,
    input_dir: str | os.PathLike[str] | None = None,
    weights: list[int] | None = None,
    num_workers: int | None = None,
    fast_dev_run: bool | int = False,
    num_nodes: int | None = None,
    machine: Any = None,
    num_downloaders: int | None = None,
    num_uploaders: int | None = None,
    reorder_files: bool = True,
    error_when_not_empty: bool = False,
    reader: Any = None,
    batch_size: int | None = None,
    start_method: str | None = None,
    optimize_dns: bool | None = None,
    storage_options: dict[str, Any] | None = None,
    keep_data_ordered: bool | None = None,
    broadcast_paths: bool = False,
    verbose: bool = True,
) -> None:
    """Apply ``fn(input, output_dir)`` to every input in parallel; ``fn`` writes files and returns None.

    With a remote ``output_dir`` (``s3://...``), ``fn`` gets a local staging folder and every file it
    writes there is uploaded to the same relative key. ``fn`` may also accept ``is_last`` (True for
    the last input of an ordered worker slice) and ``device``.

    Args:
        fn: called as ``fn(input, output_dir)``.
        inputs: a non-empty sequence of inputs.
        output_dir: a local folder or a URL, ``{%Y-%m-%d}``-style templates expanded.
        input_dir: where the input files live; with a URL, files it names are downloaded first.
        weights: a positive weight per input, to balance the work between workers.
        num_workers: worker processes on this machine (default: the CPU count).
        fast_dev_run: process only the first 10 inputs per worker (or this many).
        num_nodes: the machine count; only with a multi-node launch (see ``docs/optimize.md``).
        machine: accepted for compatibility; needs a multi-node launch like ``num_nodes``.
        num_downloaders: with a remote ``input_dir``, how many inputs' files each worker downloads ahead of
            ``fn`` (default 2, as upstream; 0 downloads each input's files just before ``fn`` runs).
        num_uploaders: concurrent uploads per worker for a remote output (default 2).
        reorder_files: with a local ``input_dir``, balance workers by the size of the files each input names.
        error_when_not_empty: refuse an output that already holds files.
        reader: a :class:`~litdata_prep.BaseReader` (e.g. ``ParquetReader``) that remaps and reads inputs.
        batch_size: give ``fn`` lists of this many inputs.
        start_method: ``"forkserver"`` (default on Linux), ``"spawn"`` (default elsewhere) or ``"fork"``
            (default in notebooks).
        optimize_dns: ignored, with a warning (upstream rewrites a Lightning Studio's DNS settings).
        storage_options: credentials and endpoint for the output URL (and a remote ``input_dir``).
        keep_data_ordered: False (default) = one shared queue per node; True = static ordered slices.
        broadcast_paths: ignored, with a warning on several nodes: every node expands date templates itself.
        verbose: show a progress bar.

    Raises:
        ValueError, TypeError, PermissionError: bad arguments, found before any worker starts.
        WorkerError: ``fn`` raised on an input (the message names it) or a worker process died.
    """
    if not callable(fn):
        raise TypeError(f"map: fn must be callable, got {fn!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"map: batch_size must be a positive int, got {batch_size!r}")
    if reader is not None and weights is not None:
        raise ValueError("map: give reader or weights, not both")
    nodes = detect_nodes()
    check_node_request(num_nodes, machine, nodes)
    downloaders = check_knobs("map", num_downloaders, optimize_dns, broadcast_paths, nodes.num_nodes)
    workers = default_num_workers(num_workers)
    method = resolve_start_method(start_method)
    for name, obj in (("fn", fn), ("reader", reader)):
        check_spawnable(name, obj, method)
    resolved_input = resolve_dir(input_dir) if input_dir is not None else None
    items, weights = prepare_items("map", inputs, batch_size, reader, weights, workers, resolved_input, reorder_files)

    output = open_output(output_dir, storage_options, "map")
    if error_when_not_empty:
        found = [k for k in output.list() if not k.startswith((".litdata-staging-", ".litdata-write-probe-"))]
        if found:
            raise ValueError(
                f"map: output_dir {output.display} is not empty ({len(found)} files, e.g. {found[:3]}) and "
                "error_when_not_empty=True; choose an empty output_dir"
            )
    limit = limit_for_dev_run(fast_dev_run)
    ranks = [nodes.node_rank * workers + w for w in range(workers)]
    slices: list[Numbered] | None = None
    shared: Numbered | None = None
    if keep_data_ordered:
        slices = worker_slices(items, workers, nodes.num_nodes, nodes.node_rank, weights)
        slices = [s[:limit] for s in slices] if limit else slices
        total = sum(len(s) for s in slices)
    else:
        shared = node_share(items, nodes.num_nodes, nodes.node_rank, weights)
        shared = shared[:limit] if limit else shared
        total = len(shared)

    staging = make_staging(output, nodes.node_rank, "map")
    try:
        specs = []
        for w, rank in enumerate(ranks):
            worker_staging = staging / f"rank-{rank}"
            worker_staging.mkdir()
            specs.append(
                WorkerSpec(
                    kind="map",
                    fn=fn,
                    rank=rank,
                    staging=str(worker_staging),
                    node_staging=str(staging),
                    output=output,
                    items=slices[w] if slices is not None else None,
                    reader=reader,
                    input_dir=resolved_input if resolved_input is not None and resolved_input.url else None,
                    storage_options=dict(storage_options or {}),
                    upload_threads=num_uploaders or 2,
                    downloaders=downloaders,
                    env=nodes.worker_env(rank, workers),
                )
            )
        if verbose:
            print(f"map: {total} inputs on {workers} {method} workers -> {output.display}", flush=True)
        run_workers(specs, method, shared=shared, total=total, verbose=verbose, desc="map")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
