"""``optimize``/``map`` with ``executor="ray"``: the inputs' batches run on a Ray cluster's worker actors.

The driver splits the inputs into contiguous batches and keeps ``num_workers`` actors busy: whichever
actor is free takes the next batch, so a slow node does not hold the job back. Each batch is one
attempt of a local worker (:func:`~litdata_prep._worker.run_spec`) under a rank of its own, so two
attempts never write the same chunk file. The index (merged once, on the driver, in batch order)
names only the chunks of finished attempts; every other chunk file of the job is deleted at the end.
A batch whose actor or node died is redone elsewhere. With ``use_checkpoint=True`` the driver
records each finished batch in ``.checkpoints/ray.json`` and a killed driver resumes from there.

Each attempt stages in a folder of its own: for a local output (shared by every node) under
:data:`~litdata_prep._staging.RAY_STAGING`, a root the driver makes and removes, so killed actors'
folders go too and a batch started after the job stopped fails instead of writing; for a bucket, in
the node's temporary directory.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from litdata_format import DatasetIndex, parse_index
from litdata_io.internal import declare_worker, freeze_inherited
from litdata_prep._checkpoint import CHECKPOINT_DIR, fingerprint
from litdata_prep._engine import ProgressBar, WorkerError
from litdata_prep._inputs import Numbered, contiguous_bins
from litdata_prep._output import Output, ray_staging
from litdata_prep._ray.machine import Machine, as_machine
from litdata_prep._staging import temp_staging
from litdata_prep._worker import Failed, WorkerSpec, run_spec

__all__ = ["RAY_CHECKPOINT", "RAY_CLUSTER_HELP", "RayExecutor", "import_ray", "ray_executor"]

RAY_CHECKPOINT = f"{CHECKPOINT_DIR}/ray.json"
# How long a stopped job waits for the actors it killed mid-batch to be gone (ray.kill does not wait).
KILL_WAIT_S = 60.0
# How long a job stopped by a failed batch lets the other batches in flight end by themselves first.
FINISH_WAIT_S = 10.0
_INSTALL = 'pip install "litdata-prep[ray]"'


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError that names the install line."""
    try:
        import ray
    except ImportError as err:
        raise ImportError(f'executor="ray" needs Ray: {_INSTALL} (or "litdata[ray]")') from err
    return ray


@dataclass(frozen=True)
class RayExecutor:
    """Run ``optimize``/``map`` on a Ray cluster (``executor=RayExecutor(...)``; ``"ray"`` takes the defaults).

    Attributes:
        address: the cluster to connect to when Ray is not initialised yet (``ray.init(address=...)``);
            None means ``RAY_ADDRESS``, else a new local Ray instance.
        batches_per_worker: how finely the inputs are cut: about this many batches per worker. More
            batches balance slow nodes better; each batch ends its last chunk early (more, smaller chunks).
        max_attempts: how many times a batch is tried when its worker or node dies before the job fails.
        num_cpus: CPUs each worker actor reserves (without ``machine``).
        runtime_env: Ray's ``runtime_env`` for the worker actors (code, packages, environment variables).
        num_nodes: run on this many distinct nodes of the cluster, ``num_workers`` actors on each
            (``optimize(num_nodes=N)`` sets it); None: actors go wherever the cluster has room.
        machine: what each of the ``num_nodes`` nodes reserves (CPUs, GPUs, memory), shared by its
            actors; None: ``num_cpus`` per actor.
        placement_timeout: seconds to wait for the cluster to place the ``num_nodes`` nodes before
            the job fails, naming what the cluster has.
    """

    address: str | None = None
    batches_per_worker: int = 4
    max_attempts: int = 3
    num_cpus: float = 1
    runtime_env: dict[str, Any] | None = field(default=None, hash=False)
    num_nodes: int | None = None
    machine: Machine | None = None
    placement_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.batches_per_worker < 1 or self.max_attempts < 1 or self.num_cpus <= 0:
            raise ValueError(
                f"RayExecutor: batches_per_worker and max_attempts must be at least 1 and num_cpus positive, got {self}"
            )
        if self.num_nodes is not None and self.num_nodes < 1:
            raise ValueError(f"RayExecutor: num_nodes must be at least 1, got {self.num_nodes}")

    def connect(self) -> Any:
        """The ``ray`` module, connected to the cluster (see :meth:`check_named` for the error without one)."""
        ray = self.check_named()
        if not ray.is_initialized():
            ray.init(address=self.address)
        return ray

    def check_named(self) -> Any:
        """The ``ray`` module; a ValueError saying how to start a cluster if ``num_nodes``/``machine`` need one."""
        ray = import_ray()
        named = self.address is not None or os.environ.get("RAY_ADDRESS") or ray.is_initialized()
        if not named and (self.num_nodes or self.machine):
            raise ValueError(f"{self.asked()} needs a Ray cluster, and none is named. {RAY_CLUSTER_HELP}")
        return ray

    def asked(self) -> str:
        """``num_nodes=...``/``machine=...`` as the user gave them, for messages."""
        parts = [f"num_nodes={self.num_nodes}"] if self.num_nodes else []
        return ", ".join([*parts, *([f"machine={self.machine}"] if self.machine else [])]) or "executor='ray'"

    def default_workers(self) -> int:
        """One worker per ``num_cpus`` CPUs of the whole cluster (per node of ``machine`` with ``num_nodes``)."""
        if self.num_nodes:
            per_node = int(self.machine.cpus // self.num_cpus) if self.machine else 1
            return self.num_nodes * max(1, per_node)
        cpus = float(self.connect().cluster_resources().get("CPU", 1))
        return max(1, int(cpus // self.num_cpus))

    def total_workers(self, num_workers: int) -> int:
        """The worker actors of a job.

        Args:
            num_workers: the workers asked for (per node with ``num_nodes``).
        """
        return num_workers * (self.num_nodes or 1)


#: How to get a Ray cluster, for the errors of num_nodes/machine without one.
RAY_CLUSTER_HELP = (
    "To run on N machines, start a Ray cluster: `ray start --head --port=6379` on one machine, "
    '`ray start --address=<head-ip>:6379` on each of the others (pip install "litdata-prep[ray]" on all), '
    "then set RAY_ADDRESS=<head-ip>:6379 where the script runs (or pass executor=RayExecutor(address=...)); "
    "the output_dir must be reachable from every node (a bucket URL or a shared filesystem)."
)


def ray_executor(executor: Any, what: str, num_nodes: int | None = None, machine: Any = None) -> RayExecutor | None:
    """``executor`` checked: None (worker processes on this machine) or a :class:`RayExecutor`.

    ``num_nodes``/``machine`` go to the Ray executor; without one, a reachable cluster
    (``RAY_ADDRESS``) takes them, and otherwise the local engine's multi-node launch checks them.
    """
    chosen = as_machine(machine)
    wants_nodes = num_nodes is not None or chosen is not None
    if executor is None or executor == "processes":
        if not (wants_nodes and executor is None and os.environ.get("RAY_ADDRESS")):
            return None
        executor = "ray"
    if executor == "ray":
        executor = RayExecutor()
    if not isinstance(executor, RayExecutor):
        raise ValueError(f"{what}: executor must be None, 'processes', 'ray' or a RayExecutor(...), got {executor!r}")
    if not wants_nodes:
        return executor
    executor = replace(executor, num_nodes=num_nodes or executor.num_nodes or 1, machine=chosen or executor.machine)
    executor.check_named()  # before the job touches its output
    return executor


class _BatchRunner:
    """A worker actor: runs batches, each in a fresh staging folder (``spec.staging``, else of its node)."""

    def ready(self) -> bool:
        return True

    def run(self, spec: WorkerSpec) -> dict[str, Any]:
        freeze_inherited()  # as in any worker (the actor lives for many batches)
        declare_worker()
        if spec.staging:  # under the driver's staging root (a local output): it goes at the job's end
            staging = spec.staging
            # Not its parents: a batch pushed to an actor ray.kill reported dead may still start after
            # the driver removed the root; it fails here instead of writing into the output.
            Path(staging).mkdir()
        else:
            staging = str(temp_staging(spec.task.what))  # if this actor is killed, the node's next job removes it
        try:
            os.environ.update(spec.env)
            spec = replace(spec, staging=staging)
            result = run_spec(spec, queue.SimpleQueue(), None)  # the driver counts progress per finished batch
            if isinstance(result, Failed):
                return {"failed": result}
            out: dict[str, Any] = {"summary": result.summary}
            if result.index is not None:
                out["index"] = result.index.to_json()
            if result.keys is not None:
                out["keys"] = json.dumps(result.keys)
            return out
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@dataclass
class RayPlan:
    """The batches of a Ray job and what the finished ones left (the part of the checkpoint that resumes)."""

    job: str  # a fingerprint of the inputs, to recognise the same job again
    bounds: list[tuple[int, int]]  # each batch's [start, stop) among the inputs
    done: dict[int, dict[str, Any]] = field(default_factory=dict)  # per finished batch: its rank, its result
    next_rank: int = 0  # the rank the next attempt gets

    @classmethod
    def make(cls, items: Sequence[Any], num_workers: int, per_worker: int, first_rank: int) -> RayPlan:
        count = max(1, min(len(items), num_workers * per_worker))
        bounds = [(r.start, r.stop) for r in contiguous_bins(len(items), count) if len(r)]
        return cls(fingerprint(enumerate(items)), bounds, next_rank=first_rank)

    @classmethod
    def resume(cls, output: Output, items: Sequence[Any], fresh: RayPlan) -> RayPlan:
        """The recorded plan of an interrupted run of the same inputs, else ``fresh``."""
        obj = output.read_json(RAY_CHECKPOINT)
        if obj is None:
            return fresh
        if obj.get("job") != fresh.job:
            raise ValueError(
                f"{output.url_for(RAY_CHECKPOINT)}: the inputs differ from the interrupted run's; resume with the "
                "same inputs, or pass mode='overwrite' to start over"
            )
        done = {int(b): entry for b, entry in obj["done"].items()}
        return cls(obj["job"], [tuple(b) for b in obj["bounds"]], done, max(obj["next_rank"], fresh.next_rank))

    def save(self, output: Output) -> None:
        output.write_json(
            RAY_CHECKPOINT, {"job": self.job, "bounds": self.bounds, "done": self.done, "next_rank": self.next_rank}
        )


def run_on_ray(
    executor: RayExecutor,
    plan: RayPlan,
    items: Sequence[Any],
    num_workers: int,
    make_spec: Callable[[int, Numbered], WorkerSpec],
    output: Output,
    what: str,
    verbose: bool,
    checkpoint: bool,
) -> RayPlan:
    """Run the unfinished batches of ``plan`` on the cluster (``make_spec(rank, batch)`` is an attempt's spec).

    With ``checkpoint``, each finished batch is recorded in :data:`RAY_CHECKPOINT`. Returns the plan, every batch done.

    Raises:
        WorkerError: ``fn`` raised (with the input and the remote traceback), a batch could not be
            started on a worker, or its workers died ``max_attempts`` times.
    """
    ray = executor.connect()
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    options: dict[str, Any] = {"num_cpus": executor.num_cpus, "max_restarts": 0, "max_task_retries": 0}
    if executor.runtime_env is not None:
        options["runtime_env"] = executor.runtime_env
    nodes = _place_nodes(ray, executor, num_workers, what) if executor.num_nodes else None
    if nodes is not None and executor.machine is not None:
        options.update(executor.machine.ray_resources(num_workers // len(nodes.bundle_specs)))
    actor_class = ray.remote(**options)(_BatchRunner)
    started = 0
    root = ray_staging(output)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)  # left by a driver that was killed
        root.mkdir(parents=True)  # the attempts' folders go in it (see _BatchRunner.run)
    todo = deque(b for b in range(len(plan.bounds)) if b not in plan.done)
    total = sum(plan.bounds[b][1] - plan.bounds[b][0] for b in todo)
    attempts = dict.fromkeys(todo, 0)
    progress = ProgressBar(total, what, verbose)
    if verbose:
        print(f"{what}: {total} inputs in {len(todo)} batches on {num_workers} Ray workers -> {output.url}")
    starting: dict[Any, Any] = {}  # ready() call -> actor not yet known to be placed
    running: dict[Any, tuple[Any, int, int]] = {}  # run() call -> (actor, batch, rank)
    idle: list[Any] = []
    failed_starts = 0

    def start_actor() -> None:
        nonlocal started
        placed = actor_class
        if nodes is not None:  # round-robin over the job's nodes (an actor redone goes where the next is due)
            strategy = PlacementGroupSchedulingStrategy(
                placement_group=nodes, placement_group_bundle_index=started % len(nodes.bundle_specs)
            )
            placed = actor_class.options(scheduling_strategy=strategy)
        started += 1
        actor = placed.remote()
        starting[actor.ready.remote()] = actor

    for _ in range(min(num_workers, len(todo))):
        start_actor()
    progress.show()
    try:
        while todo or running:
            while todo and idle:
                batch = todo.popleft()
                start, stop = plan.bounds[batch]
                rank = plan.next_rank
                plan.next_rank += 1
                attempts[batch] += 1
                actor = idle.pop()
                spec = make_spec(rank, Numbered(range(start, stop), items[start:stop]))
                if root is not None:
                    spec = replace(spec, staging=str(root / f"rank-{rank}"))
                running[actor.run.remote(spec)] = (actor, batch, rank)
            ready, _ = ray.wait([*starting, *running], num_returns=1)
            call = ready[0]
            if call in starting:
                actor = starting.pop(call)
                try:
                    ray.get(call)
                except ray.exceptions.RayError as err:
                    failed_starts += 1
                    if failed_starts > executor.max_attempts * num_workers:  # e.g. a runtime_env that cannot be set up
                        raise WorkerError(f"{what}: Ray worker actors could not be started: {err}", -1) from err
                    start_actor()  # it died before it ran anything (its node was removed): start another
                else:
                    idle.append(actor)
                continue
            actor, batch, rank = running.pop(call)
            try:
                result = ray.get(call)
            except ray.exceptions.RayTaskError as err:  # the batch could not even be unpickled there
                raise WorkerError(f"{what}: batch {batch} could not run on a Ray worker: {err}", rank) from err
            except ray.exceptions.RayError as err:  # the actor or its node died: redo the batch elsewhere
                if attempts[batch] >= executor.max_attempts:
                    raise WorkerError(
                        f"{what}: the Ray workers running inputs {plan.bounds[batch]} died {attempts[batch]} times; "
                        f"the job is stopped (last error: {err})",
                        rank,
                    ) from err
                todo.appendleft(batch)
                start_actor()
                continue
            failed: Failed | None = result.get("failed")
            if failed is not None:
                raise WorkerError(
                    f"{what}: {failed.headline}", failed.rank, failed.input, failed.position, failed.traceback
                )
            idle.append(actor)
            plan.done[batch] = {"rank": rank, **{k: v for k, v in result.items() if k != "summary"}}
            if checkpoint:
                plan.save(output)
            progress.update(plan.bounds[batch][1] - plan.bounds[batch][0])
        return plan
    except WorkerError:
        if running:
            # A batch that ends by itself has published all it will; only those still going are killed (below).
            finished, _ = ray.wait(list(running), num_returns=len(running), timeout=FINISH_WAIT_S)
            for call in finished:
                idle.append(running.pop(call)[0])
        raise
    finally:
        progress.close()
        # Every actor goes before the driver looks at the output: no attempt writes after that.
        for actor in [*idle, *starting.values(), *(a for a, _, _ in running.values())]:
            ray.kill(actor)
        if running:
            # ray.kill only asks: a batch in flight could still publish a chunk after the driver removed the
            # failed job's. Its call ends (with the actor's death) once its process is gone.
            ray.wait(list(running), num_returns=len(running), timeout=KILL_WAIT_S)
        if root is not None:  # with the folders of attempts whose actor or node died mid-batch
            shutil.rmtree(root, ignore_errors=True)
        if nodes is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(nodes)


def _place_nodes(ray: Any, executor: RayExecutor, num_workers: int, what: str) -> Any:
    """A placement group of one bundle per node (on distinct nodes), ready; or an error naming what the cluster has."""
    from ray.util.placement_group import placement_group, remove_placement_group

    count = executor.num_nodes or 1
    per_node = max(1, num_workers // count)
    machine = executor.machine or Machine("per-worker", cpus=executor.num_cpus * per_node)
    group = placement_group([machine.bundle() for _ in range(count)], strategy="STRICT_SPREAD")
    ready, _ = ray.wait([group.ready()], timeout=executor.placement_timeout)
    if ready:
        return group
    remove_placement_group(group)
    have = [
        {k: v for k, v in node.get("Resources", {}).items() if k in ("CPU", "GPU", "memory")}
        for node in ray.nodes()
        if node.get("Alive")
    ]
    raise ValueError(
        f"{what}: {executor.asked()} needs {count} distinct nodes of the Ray cluster that each have {machine.bundle()} "
        f"free, and it could not place them in {executor.placement_timeout:g} s; its live nodes have {have}. Add "
        f"nodes (`ray start --address=<head-ip>:6379` on each), or lower num_nodes or the machine"
    )


def finished_parts(plan: RayPlan, source: str) -> tuple[list[DatasetIndex], dict[int, list[Any]]]:
    """The finished batches' rank indexes in batch order, and the keys each rank computed (``key_fn``)."""
    parts, keys = [], {}
    for batch in sorted(plan.done):
        entry = plan.done[batch]
        parts.append(parse_index(entry["index"], f"{source} (batch {batch}, rank {entry['rank']})"))
        if "keys" in entry:
            keys[entry["rank"]] = json.loads(entry["keys"])
    return parts, keys
