"""Which machine (node) of a multi-node ``optimize``/``map`` this process is.

A multi-node job is the same script started once per machine; each node learns its rank and the node
count from the environment, in this order: ``DATA_OPTIMIZER_NUM_NODES`` / ``DATA_OPTIMIZER_NODE_RANK``
(upstream's), torchrun (``GROUP_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``), SLURM (``SLURM_NNODES`` /
``SLURM_NODEID``), one process per node. The last node merges the per-node indexes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LAUNCH_HELP", "NodeInfo", "check_node_request", "detect_nodes"]

LAUNCH_HELP = (
    "To process on several machines, start the same script once on each machine with "
    "DATA_OPTIMIZER_NUM_NODES=<N> DATA_OPTIMIZER_NODE_RANK=<0..N-1> set (or under torchrun with "
    "--nnodes=<N> --nproc-per-node=1, or SLURM with one task per node), and an output_dir every machine "
    "can reach (a bucket URL or a shared filesystem). Each node then processes its share and the last "
    "node writes index.json."
)


@dataclass(frozen=True)
class NodeInfo:
    """This process's place in a multi-node job (``source``: the environment that said so, or ``"single"``)."""

    num_nodes: int = 1
    node_rank: int = 0
    source: str = "single"

    @property
    def is_last(self) -> bool:
        """Whether this node merges the per-node indexes into ``index.json``."""
        return self.node_rank == self.num_nodes - 1

    def worker_env(self, rank: int, num_workers: int) -> dict[str, str]:
        """The environment upstream gives each worker process, so ``fn`` can tell where it runs."""
        return {
            "DATA_OPTIMIZER_GLOBAL_RANK": str(rank),
            "DATA_OPTIMIZER_NUM_WORKERS": str(num_workers),
            "DATA_OPTIMIZER_NUM_NODES": str(self.num_nodes),
            "DATA_OPTIMIZER_NODE_RANK": str(self.node_rank),
        }


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name, "")
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"the environment variable {name}={raw!r} must be an integer") from None


def _checked(num_nodes: int, node_rank: int, source: str) -> NodeInfo:
    if num_nodes < 1:
        raise ValueError(f"{source}: the node count must be at least 1, got {num_nodes}")
    if not 0 <= node_rank < num_nodes:
        raise ValueError(f"{source}: node rank {node_rank} is outside 0..{num_nodes - 1}")
    return NodeInfo(num_nodes, node_rank, source)


def detect_nodes(env: Mapping[str, str] | None = None) -> NodeInfo:
    """Read the node count and rank from the environment (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get("DATA_OPTIMIZER_NUM_NODES"):
        num_nodes = _int(env, "DATA_OPTIMIZER_NUM_NODES")
        rank = _int(env, "DATA_OPTIMIZER_NODE_RANK") if env.get("DATA_OPTIMIZER_NODE_RANK") else 0
        return _checked(num_nodes, rank, "DATA_OPTIMIZER_NUM_NODES/DATA_OPTIMIZER_NODE_RANK")
    if env.get("GROUP_RANK") and env.get("WORLD_SIZE") and env.get("LOCAL_WORLD_SIZE"):
        local = _int(env, "LOCAL_WORLD_SIZE")
        if local != 1:
            raise ValueError(
                f"optimize/map runs under torchrun with {local} processes per node; launch it with "
                "--nproc-per-node=1 (it starts num_workers processes itself) or set DATA_OPTIMIZER_NUM_NODES "
                "and DATA_OPTIMIZER_NODE_RANK"
            )
        return _checked(_int(env, "WORLD_SIZE"), _int(env, "GROUP_RANK"), "torchrun")
    nodes = env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES")
    if nodes and env.get("SLURM_NODEID") and int(nodes) > 1:
        tasks = env.get("SLURM_NTASKS")
        if tasks and int(tasks) != int(nodes):
            raise ValueError(
                f"optimize/map runs in a SLURM step with {tasks} tasks on {nodes} nodes; start one task per "
                "node (srun --ntasks-per-node=1), it starts num_workers processes itself"
            )
        return _checked(int(nodes), _int(env, "SLURM_NODEID"), "SLURM")
    return NodeInfo()


def check_node_request(num_nodes: int | None, machine: Any, info: NodeInfo) -> None:
    """Refuse ``num_nodes``/``machine`` that the environment's multi-node launch (if any) cannot honour.

    Upstream launches a cloud job for these; here the user starts the machines.
    """
    if num_nodes is None and machine is None:
        return
    if info.source == "single":
        asked = f"num_nodes={num_nodes!r}" if num_nodes is not None else f"machine={machine!r}"
        from litdata_prep._ray.executor import RAY_CLUSTER_HELP

        raise ValueError(
            f"{asked} was given, but no Ray cluster is named (RAY_ADDRESS or executor=RayExecutor(address=...)) "
            f"and this process was not started as part of a multi-node job. {RAY_CLUSTER_HELP} Or: {LAUNCH_HELP}"
        )
    if num_nodes is not None and num_nodes != info.num_nodes:
        raise ValueError(
            f"num_nodes={num_nodes} was given, but the environment ({info.source}) says this job runs on "
            f"{info.num_nodes} nodes; drop num_nodes or make them agree"
        )
