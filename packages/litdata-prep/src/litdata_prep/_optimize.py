"""``optimize``: turn inputs into an optimized (chunked) dataset, in parallel, locally or into a bucket."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from typing import Any, Literal

from litdata_format import INDEX_FILENAME, BaseItemLoader, DatasetIndex, merge_indexes
from litdata_format.internal import add_note, parse_chunk_name, temp_target
from litdata_io import Dir
from litdata_prep._checkpoint import (
    CHECKPOINT_DIR,
    WorkerCheckpoint,
    clear_checkpoints,
    load_checkpoints,
    published_before_cleanup,
    save_node_config,
)
from litdata_prep._checks import prepare_optimize
from litdata_prep._indexes import (
    LAYOUT_HINT,
    in_input_order,
    next_chunk_indexes,
    node_index_key,
    wait_for_node_indexes,
)
from litdata_prep._inputs import Numbered
from litdata_prep._job import OptimizeJob
from litdata_prep._key_index import KEYS_DIR, publish_keys
from litdata_prep._nodes import NodeInfo
from litdata_prep._output import DatasetExistsError, Output, make_staging, remove_staging
from litdata_prep._output_lock import OutputLock
from litdata_prep._ray.executor import RAY_CHECKPOINT, RayExecutor, RayPlan, finished_parts, run_on_ray
from litdata_prep._staging import PROBE_PREFIX, STAGING_PREFIX, is_staged
from litdata_prep._worker import Done, OptimizeTask, WorkerSpec

__all__ = ["is_dataset_file", "optimize"]


def is_dataset_file(key: str) -> bool:
    """Whether ``key`` is a chunk, index, key index, checkpoint or staged file optimize writes, or its temp file."""
    folder, _, name = key.rpartition("/")
    target = temp_target(name)
    if target is not None and target.startswith(PROBE_PREFIX):  # another job's, not holding the lock yet
        return False
    name = target or name
    key = f"{folder}/{name}" if folder else name
    return (
        parse_chunk_name(key) is not None
        or name.endswith(INDEX_FILENAME)
        or key.startswith(KEYS_DIR)
        or key.startswith(CHECKPOINT_DIR + "/")
        or is_staged(key)
    )


def _prepare_output(output: Output, mode: str | None, use_checkpoint: bool, nodes: NodeInfo) -> DatasetIndex | None:
    """Apply ``mode`` to what the output holds; return the existing index when appending."""
    keys = output.all_keys()
    existing = output.read_index() if INDEX_FILENAME in keys else None
    if mode is None and existing is not None:
        # Files optimize does not write are left alone (as upstream does): only a dataset is refused.
        raise DatasetExistsError(
            f"optimize: output_dir {output.url} already holds an optimized dataset (index.json). Datasets are "
            "immutable: choose a new output_dir (e.g. with a version or a {%Y-%m-%d} suffix).\n HINT: If you want "
            "to append/overwrite to the existing dataset, pass mode='append' to add to it or mode='overwrite' to "
            "replace it"
        )
    if nodes.num_nodes > 1:
        # Other nodes may already be writing: stale files are removed by the merging node at the end.
        return existing if mode == "append" else None
    stale = [k for k in keys if is_dataset_file(k)]
    if mode == "append":
        stale = [k for k in stale if k != INDEX_FILENAME and parse_chunk_name(k) is None and not k.startswith(KEYS_DIR)]
        if not use_checkpoint:
            referenced = {c.filename for c in existing.chunks} if existing is not None else set()
            stale += [k for k in keys if parse_chunk_name(k) is not None and k not in referenced]
    if use_checkpoint and mode != "overwrite":
        stale = [k for k in stale if not (parse_chunk_name(k) is not None or k.startswith(CHECKPOINT_DIR + "/"))]
    output.delete_many(stale + [k for k in keys if _leftover_temp(k)])
    return existing if mode == "append" else None


def _leftover_temp(key: str) -> bool:
    """Whether ``key`` is the temporary file of a dataset file's write a killed run interrupted (not in staging)."""
    is_temp = temp_target(key.rpartition("/")[2]) is not None
    return is_temp and is_dataset_file(key) and not key.startswith(STAGING_PREFIX)


def _collect_unreferenced(output: Output, index: DatasetIndex | None) -> None:
    """Remove chunks ``index`` does not reference and the temporary files of interrupted writes."""
    referenced = {c.filename for c in index.chunks} if index is not None else set()
    output.delete_many(
        [k for k in output.all_keys() if (parse_chunk_name(k) is not None and k not in referenced) or _leftover_temp(k)]
    )


def optimize(
    fn: Callable[[Any], Any],
    inputs: Iterable[Any] | None = None,
    output_dir: str | os.PathLike[str] | Dir = "optimized_data",
    queue: Any = None,
    input_dir: str | os.PathLike[str] | None = None,
    weights: list[int] | None = None,
    chunk_size: int | None = None,
    chunk_bytes: int | str | None = None,
    align_chunking: bool = False,
    compression: str | None = None,
    compression_level: str | None = None,
    compression_batch_size: int | None = None,
    encryption: Any = None,
    num_workers: int | None = None,
    fast_dev_run: bool | int = False,
    num_nodes: int | None = None,
    machine: Any = None,
    num_downloaders: int | None = None,
    num_uploaders: int | None = None,
    reorder_files: bool = True,
    reader: Any = None,
    batch_size: int | None = None,
    mode: Literal["append", "overwrite"] | None = None,
    use_checkpoint: bool = False,
    item_loader: BaseItemLoader | None = None,
    start_method: str | None = None,
    optimize_dns: bool | None = None,
    storage_options: dict[str, Any] | None = None,
    keep_data_ordered: bool | None = None,
    verbose: bool = True,
    broadcast_paths: bool = False,
    key_fn: Callable[[Any], Any] | None = None,
    executor: Literal["processes", "ray"] | RayExecutor | None = None,
) -> None:
    """Convert inputs into an optimized dataset: ``fn`` turns each input into samples, workers write chunks.

    Args:
        fn: called on each input; returns one sample, yields any number (none filters the input out;
            if no input gives a sample, the dataset is empty: an index with no chunks).
        inputs: a sequence of inputs, a ``StreamingDataset`` (``fn`` gets each sample) or a
            ``StreamingDataLoader`` (``fn`` gets each batch). Give ``inputs`` or ``queue``.
        output_dir: a local folder or a URL (``s3://...``), ``{%Y-%m-%d}``-style templates expanded.
        queue: a ``multiprocessing.Queue`` of inputs ended by one :data:`ALL_DONE`.
        input_dir: where the input files live; with a URL, files it names are downloaded before ``fn`` runs.
        weights: a positive weight per input, to balance the work between workers.
        chunk_size: items per chunk (tokens with ``TokensLoader``). Give this or ``chunk_bytes``.
        chunk_bytes: bytes per chunk, an int or a string such as ``"64MB"``; ``"64MB"`` when neither is given.
        align_chunking: every worker but the last writes whole chunks, so the chunk layout equals one worker's.
        compression: ``None``, ``"zstd"`` or ``"zstd:N"``.
        compression_level: ``"chunk"`` (default: whole files, ``chunk-R-I.zstd.bin``), ``"batch"`` (runs of
            ``compression_batch_size`` items per zstd frame inside ``.bin``, upstream 0.2.76's default) or
            ``"sample"`` (one frame per item).
        compression_batch_size: items per frame with ``"batch"`` (default 256; giving it alone means ``"batch"``).
        encryption: a :class:`~litdata_format.FernetEncryption` / :class:`~litdata_format.RSAEncryption`.
        num_workers: worker processes on this machine (default: the CPU count).
        fast_dev_run: process only the first 10 inputs per worker (or this many).
        num_nodes: the machine count; only with a multi-node launch (see ``docs/optimize.md``).
        machine: accepted for compatibility; needs a multi-node launch like ``num_nodes``.
        num_downloaders: with a remote ``input_dir``, how many inputs' files each worker downloads ahead of
            ``fn`` (default 2, as upstream; 0 downloads each input's files just before ``fn`` runs).
        num_uploaders: concurrent uploads per worker for a remote output (default 2).
        reorder_files: with a local ``input_dir``, balance workers by the size of the files each input names.
        reader: a :class:`~litdata_prep.BaseReader` (e.g. ``ParquetReader``) that remaps and reads inputs.
        batch_size: give ``fn`` lists of this many inputs.
        mode: ``None`` (refuse an output that holds a dataset; other files are left alone), ``"append"``
            or ``"overwrite"``.
        use_checkpoint: record progress so a killed run resumes where it stopped when run again.
        item_loader: the sample layout, e.g. ``TokensLoader()`` (``chunk_size`` then counts tokens).
        start_method: ``"fork"``, ``"forkserver"`` or ``"spawn"``; by default on Linux a fork when no
            other thread runs in this process, else a forkserver; ``"spawn"`` elsewhere, ``"fork"`` in notebooks.
        optimize_dns: ignored, with a warning (upstream rewrites a Lightning Studio's DNS settings).
        storage_options: credentials and endpoint for the output URL (and a remote ``input_dir``).
        keep_data_ordered: None (default) = each worker takes a static contiguous slice of the inputs and fills
            whole chunks (an iterator of inputs goes through the shared queue instead); False = one shared
            queue per node (balances slow inputs, at the cost of more, smaller chunks); True = static slices
            (needed by ``use_checkpoint`` and ``align_chunking``). The samples keep the inputs' order in all three.
        verbose: show a progress bar and a summary.
        broadcast_paths: ignored, with a warning on several nodes: every node expands date templates itself.
        key_fn: ``sample -> key`` (a str or an int, unique); writes the key index ``keys/shard-00000.parquet``
            so ``StreamingDataset.get_by_key(key)`` / ``dataset["key"]`` finds a sample by its key.
        executor: None or ``"processes"`` (worker processes on this machine), ``"ray"`` or a
            :class:`~litdata_prep.RayExecutor` (worker actors across a Ray cluster; ``num_workers`` then
            counts them across the cluster, by default one per CPU of the cluster).

    Raises:
        ValueError, TypeError, PermissionError: bad arguments, found before any worker starts.
        DatasetExistsError: ``output_dir`` already holds a dataset and ``mode`` is None (also a RuntimeError).
        WorkerError: ``fn`` raised on an input (the message names it; the cause is the worker's traceback)
            or a worker process died.
    """
    _optimize(prepare_optimize(locals()))


def _optimize(job: OptimizeJob) -> None:
    """``optimize`` of a checked job, holding the output's lock."""
    with job.hold_output() as lock:
        index = _optimize_on_ray(job, job.ray, lock) if job.ray is not None else _optimize_on_machine(job, lock)
    if job.verbose and index is not None:
        samples = sum(c.dim or c.chunk_size for c in index.chunks)
        print(f"optimize: {job.output.url} holds {samples} samples in {len(index.chunks)} chunks", flush=True)


def _optimize_on_machine(job: OptimizeJob, lock: OutputLock) -> DatasetIndex | None:
    """``optimize`` with this machine's worker processes, holding the output's ``lock``."""
    queue, mode, use_checkpoint = job.queue, job.mode, job.use_checkpoint
    output, nodes, ranks = job.output, job.nodes, job.ranks
    slices = job.ordered_slices(job.align) if queue is None and job.ordered else None
    shared = job.shared_inputs() if queue is None and slices is None else None
    if (
        use_checkpoint
        and mode is None
        and nodes.num_nodes == 1
        and slices is not None
        and published_before_cleanup(output, nodes.node_rank, slices, ranks)
    ):
        # The run that wrote this dataset was stopped after publishing it: only clean up.
        clear_checkpoints(output, nodes.node_rank, ranks)
        remove_staging(output, nodes.node_rank)
        _collect_unreferenced(output, output.read_index())
        if job.verbose:
            print(f"optimize: {output.url} already holds this job's dataset (its run stopped before cleaning up)")
        return None
    existing = _prepare_output(output, mode, use_checkpoint, nodes)
    chunk_starts = next_chunk_indexes(existing, ranks)
    checkpoints: dict[int, WorkerCheckpoint] = {}
    total = len(shared) if isinstance(shared, Numbered) else None
    if use_checkpoint and slices is not None:
        found = load_checkpoints(output, nodes.node_rank, slices, ranks)
        save_node_config(output, nodes.node_rank, slices, ranks)
        total = sum(len(s) - c.next_input for s, c in zip(slices, found))
        checkpoints = {c.rank: c for c in found}
    elif slices is not None:
        total = sum(len(s) for s in slices)

    def task(rank: int) -> OptimizeTask:
        # The shared queue's batches are runs of consecutive inputs that the index puts back in order.
        return job.task(chunk_starts[rank], checkpoints.get(rank), keep_order=shared is not None)

    staging = make_staging(output, nodes.node_rank, "optimize")

    def publish(done: dict[int, Done]) -> DatasetIndex | None:
        """The job's index published from what the workers wrote (while they exit), its staging removed."""
        parts = [_rank_index(done, rank) for rank in ranks]
        if shared is not None:  # the queue's batches went to whichever worker was free: list them in input order
            parts = in_input_order(parts, [done[rank].chunk_inputs for rank in ranks], ranks)
        rank_keys = {rank: done[rank].keys or [] for rank in ranks} if job.key_fn is not None else None
        gc = use_checkpoint or mode == "overwrite"
        published = _finish(output, nodes, existing, parts, rank_keys, gc, lock)
        if use_checkpoint:
            clear_checkpoints(output, nodes.node_rank, ranks)
        shutil.rmtree(staging, ignore_errors=True)
        return published

    try:
        return job.run(job.worker_specs(staging, slices, task), shared, total, publish, source=queue)
    except BaseException as failure:
        if not use_checkpoint:  # with checkpoints, what was published is the next run's head start
            _remove_unpublished_chunks(output, nodes.node_rank, ranks, failure)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a failed job's (publish removed it otherwise)


def _rank_index(done: dict[int, Done], rank: int) -> DatasetIndex:
    index = done[rank].index
    if index is None:
        raise RuntimeError(f"optimize: worker {rank} finished without its index; the job cannot be completed")
    return index


def _optimize_on_ray(job: OptimizeJob, executor: RayExecutor, lock: OutputLock) -> DatasetIndex | None:
    """``optimize`` with its batches on a Ray cluster (see ``_ray``): the index is merged here, once."""
    output, nodes, mode, use_checkpoint = job.output, job.nodes, job.mode, job.use_checkpoint
    items = job.cluster_inputs()
    plan = RayPlan.make(items, job.num_workers, executor.batches_per_worker, first_rank=0)
    if use_checkpoint:
        plan = RayPlan.resume(output, items, plan)
        if mode is None and output.exists(INDEX_FILENAME) and len(plan.done) == len(plan.bounds) > 0:
            # The run that wrote this dataset was stopped after publishing it: only clean up.
            _collect_unreferenced(output, output.read_index())
            output.delete(RAY_CHECKPOINT)
            return None
    existing = _prepare_output(output, mode, use_checkpoint, nodes)
    if use_checkpoint:
        plan.save(output)
    first_rank = plan.next_rank

    def make_spec(rank: int, batch: Numbered) -> WorkerSpec:  # each actor stages in a folder of its own node
        return job.spec(rank, "", batch, job.task(next_chunk_indexes(existing, [rank])[rank]))

    try:
        run_on_ray(executor, plan, items, job.num_workers, make_spec, output, "optimize", job.verbose, use_checkpoint)
        parts, rank_keys = finished_parts(plan, output.url)
        index = _finish(output, nodes, existing, parts, rank_keys if job.key_fn is not None else None, True, lock)
    except BaseException as failure:
        if not use_checkpoint:  # with checkpoints, the finished batches are the next run's head start
            _remove_unpublished_chunks(output, nodes.node_rank, list(range(first_rank, plan.next_rank)), failure)
        raise
    if use_checkpoint:
        output.delete(RAY_CHECKPOINT)
    return index


def _remove_unpublished_chunks(output: Output, node_rank: int, ranks: list[int], failure: BaseException) -> None:
    """Delete the chunks this node's workers wrote for a job that failed, but those an index in the output names."""
    try:
        keep: set[str] = set()
        for key in (INDEX_FILENAME, node_index_key(node_rank)):
            index = output.read_index(key)
            if index is not None:
                keep.update(c.filename for c in index.chunks)
        mine = set(ranks)
        output.delete_many(
            [
                key
                for key in output.all_keys()
                if (parsed := parse_chunk_name(key)) is not None and parsed[0] in mine and key not in keep
            ]
        )
    except Exception as err:  # the job's own error is the one to raise; mention this one with it
        add_note(failure, f"optimize: removing the chunks this job wrote to {output.url} failed too: {err}")


def _finish(
    output: Output,
    nodes: NodeInfo,
    existing: DatasetIndex | None,
    parts: list[DatasetIndex],
    rank_keys: dict[int, list[Any]] | None,
    gc: bool,
    lock: OutputLock,
) -> DatasetIndex | None:
    """Publish the index: directly on one node; through per-node indexes and the last node otherwise.

    With ``rank_keys`` (``key_fn``) the key index is published just before ``index.json``, which names it.
    ``lock`` is checked to be still the job's just before.
    """
    if nodes.num_nodes > 1:
        job = lock.holder.job  # the same on every node of the job
        node_key = node_index_key(nodes.node_rank)
        node_index = merge_indexes(parts, output.url_for(node_key), LAYOUT_HINT)
        node_keys = {"rank_keys": rank_keys} if rank_keys is not None else {}  # the last node writes every node's
        output.write_json(node_key, {**node_index.to_json(), **node_keys, "job": job})
        if not nodes.is_last:
            return None
        node_parts = wait_for_node_indexes(output, nodes.num_nodes, job)
        parts = [part for part, _ in node_parts]
        if rank_keys is not None:
            rank_keys = {int(rank): ks for _, obj in node_parts for rank, ks in obj.get("rank_keys", {}).items()}
    before = [existing] if existing is not None else []
    index = merge_indexes(before + parts, output.url_for(INDEX_FILENAME), LAYOUT_HINT)
    keys = {"keys": publish_keys(output, index, existing, rank_keys)} if rank_keys is not None else {}
    lock.confirm()
    output.write_json(INDEX_FILENAME, {**index.to_json(), **keys})
    if nodes.num_nodes > 1:
        output.delete_many([node_index_key(n) for n in range(nodes.num_nodes)])
    if gc or nodes.num_nodes > 1:
        _collect_unreferenced(output, index)
    return index
