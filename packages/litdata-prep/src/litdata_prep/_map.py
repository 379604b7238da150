"""``map``: run ``fn(input, output_dir)`` over inputs in parallel; the files it writes land in ``output_dir``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from typing import Any, Literal

from litdata_io import Dir
from litdata_prep._checks import prepare_map
from litdata_prep._inputs import Numbered
from litdata_prep._job import Job
from litdata_prep._output import make_staging
from litdata_prep._ray.executor import RayExecutor, RayPlan, run_on_ray
from litdata_prep._worker import MapTask

__all__ = ["map"]


def map(
    fn: Callable[..., Any],
    inputs: Iterable[Any],
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
    executor: Literal["processes", "ray"] | RayExecutor | None = None,
) -> None:
    """Apply ``fn(input, output_dir)`` to every input in parallel; ``fn`` writes files and returns None.

    With a remote ``output_dir`` (``s3://...``), ``fn`` gets a local staging folder and every file it
    writes there is uploaded to the same relative key. ``fn`` may also accept ``is_last`` (True for
    the last input of an ordered worker slice) and ``device``.

    Args:
        fn: called as ``fn(input, output_dir)``.
        inputs: a non-empty sequence of inputs, a ``StreamingDataset`` (``fn`` gets each sample) or a
            ``StreamingDataLoader`` (``fn`` gets each batch).
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
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; by default on Linux a fork when no
            other thread runs in this process, else a forkserver; ``"spawn"`` elsewhere, ``"fork"`` in notebooks.
        optimize_dns: ignored, with a warning (upstream rewrites a Lightning Studio's DNS settings).
        storage_options: credentials and endpoint for the output URL (and a remote ``input_dir``).
        keep_data_ordered: False (default) = one shared queue per node; True = static ordered slices.
        broadcast_paths: ignored, with a warning on several nodes: every node expands date templates itself.
        verbose: show a progress bar.
        executor: None or ``"processes"`` (worker processes on this machine), ``"ray"`` or a
            :class:`~litdata_prep.RayExecutor` (worker actors across a Ray cluster; ``output_dir`` must be a
            bucket or a filesystem every node shares). A redone batch writes its files again.

    Raises:
        ValueError, TypeError, PermissionError: bad arguments, found before any worker starts.
        WorkerError: ``fn`` raised on an input (the message names it) or a worker process died.
    """
    _map(prepare_map(locals()))


def _map(job: Job) -> None:
    """``map`` of a checked job, holding its output's lock (another job writing it, or its staging folder, waits)."""
    with job.hold_output():
        if job.ray is not None:
            items = job.cluster_inputs()
            plan = RayPlan.make(items, job.num_workers, job.ray.batches_per_worker, first_rank=0)
            specs = lambda rank, batch: job.spec(rank, "", batch, MapTask())  # noqa: E731  (one attempt's spec)
            run_on_ray(job.ray, plan, items, job.num_workers, specs, job.output, "map", job.verbose, False)
            return
        slices = job.ordered_slices() if job.ordered else None
        shared = None if slices is not None else job.shared_inputs()
        total = sum(len(s) for s in slices) if slices is not None else None
        total = len(shared) if isinstance(shared, Numbered) else total
        staging = make_staging(job.output, job.nodes.node_rank, "map")
        try:
            # The staging folder goes while the workers exit (see run_workers); again here if the job failed.
            specs = job.worker_specs(staging, slices, lambda rank: MapTask())
            job.run(specs, shared, total, lambda done: shutil.rmtree(staging, ignore_errors=True))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
