"""The :class:`Job` of ``optimize`` or ``map`` on this node, built by ``_checks.prepare_optimize``/``prepare_map``.

It splits this node's inputs between its workers, describes the workers and runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from litdata_format.internal import WriterOptions
from litdata_io import Dir
from litdata_prep._checkpoint import WorkerCheckpoint, fingerprint
from litdata_prep._engine import default_start_method, run_workers
from litdata_prep._inputs import InputStream, Numbered, node_share, worker_slices
from litdata_prep._nodes import NodeInfo
from litdata_prep._output import Output
from litdata_prep._output_lock import OutputLock, hold_output
from litdata_prep._ray.executor import RayExecutor
from litdata_prep._worker import Done, MapTask, OptimizeTask, WorkerSpec

__all__ = ["Job", "OptimizeJob"]

T = TypeVar("T")


@dataclass(frozen=True)
class Job:
    """One run of ``optimize`` or ``map`` on this node, every value checked and resolved."""

    what: str  # "optimize" or "map", for messages
    fn: Callable[..., Any]
    nodes: NodeInfo
    num_workers: int  # worker processes on this machine
    start_method: str
    start_method_given: bool  # else a forkserver is decided when the workers start
    # Every node's work items (batched, remapped) in order; empty for a queue; an iterator's for one node.
    items: Sequence[Any] | InputStream
    weights: list[int] | None
    limit: int | None  # fast_dev_run's inputs per worker
    reader: Any
    input_dir: Dir | None  # a remote input folder whose files the workers download
    downloaders: int  # num_downloaders
    uploaders: int  # num_uploaders
    output: Output
    ray: RayExecutor | None  # the Ray cluster that runs the workers, or None for processes here
    ordered: bool  # static ordered slices, else a shared queue
    verbose: bool

    @property
    def ranks(self) -> list[int]:
        """The global ranks of this node's workers (they name chunk files)."""
        return [self.nodes.node_rank * self.num_workers + w for w in range(self.num_workers)]

    def hold_output(self) -> AbstractContextManager[OutputLock]:
        """Hold the output's lock for the job (its nodes share it; the merging node releases it)."""
        nodes = self.nodes
        # Every node of a multi-node job gives the lock one identity: the inputs' fingerprint and the node count.
        identity = fingerprint(enumerate(self.listed))[:16] + f"-{nodes.num_nodes}" if nodes.num_nodes > 1 else None
        return hold_output(self.output, identity, last=nodes.is_last, what=self.what)

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
        """Each worker's spec (its task from ``task(rank)``), staging in ``staging``.

        The workers share the node's staging folder: every file a worker stages is named by its
        rank (chunks) or by its input's position (downloads, map's outputs), and each folder less
        is a removal less at the job's end (~1-3 ms each where the filesystem discards freed blocks).
        """
        return [
            self.spec(rank, str(staging), slices[w] if slices is not None else None, task(rank))
            for w, rank in enumerate(self.ranks)
        ]

    def spec(self, rank: int, staging: str, items: Numbered | None, task: OptimizeTask | MapTask) -> WorkerSpec:
        """The spec of worker ``rank`` doing ``task`` on ``items`` (None: the shared queue)."""
        return WorkerSpec(
            task=task,
            fn=self.fn,
            rank=rank,
            staging=staging,
            output=self.output,
            items=items,
            reader=self.reader,
            input_dir=self.input_dir,
            upload_threads=self.uploaders,
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
        verbose, method, why = self.verbose, self.start_method, "as asked"
        if not self.start_method_given:
            why = "the default"
            if method == "forkserver":  # decided now: what runs in this process when the workers start
                method, why = default_start_method()
        if verbose:
            what = f"{total} inputs" if total is not None else "inputs from an iterator or a queue"
            print(
                f"{self.what}: {what} on {self.num_workers} {method} workers ({why}) -> {self.output.url}",
                flush=True,
            )
        return run_workers(
            specs, method, then, shared=shared, source=source, total=total, verbose=verbose, desc=self.what
        )


@dataclass(frozen=True)
class OptimizeJob(Job):
    """An ``optimize`` job: what its workers write besides running ``fn``, and how the output is treated."""

    queue: Any  # the user's multiprocessing.Queue of inputs, or None
    writer: WriterOptions
    encryption: Any  # the encryption the writer options were checked with
    key_fn: Callable[[Any], Any] | None
    mode: str | None
    use_checkpoint: bool
    align: int | None  # chunk_size under align_chunking (slices hold whole chunks)

    def task(
        self, chunk_index: int, checkpoint: WorkerCheckpoint | None = None, keep_order: bool = False
    ) -> OptimizeTask:
        """What a worker writes, from chunk number ``chunk_index`` (see :class:`OptimizeTask`)."""
        return OptimizeTask(self.writer, self.encryption, self.key_fn, chunk_index, checkpoint, keep_order)
