"""Where this process sits: its rank among the training processes and its DataLoader worker.

The rank and world size come from, in this order (the first that applies decides):

1. an initialised ``torch.distributed`` (no variable is read for them then);
2. the launcher variables, whenever ``WORLD_SIZE``, ``RANK`` or ``GLOBAL_RANK`` is set: the world
   is ``WORLD_SIZE`` (1 if unset), the rank ``RANK`` or ``GLOBAL_RANK`` (both name the global rank;
   torchrun and most launchers set ``RANK``, upstream LitData reads ``GLOBAL_RANK``; set
   both, they must agree). Without either, the rank is worked out from ``LOCAL_RANK`` and the node
   (``NODE_RANK`` or torchrun's ``GROUP_RANK``, with ``LOCAL_WORLD_SIZE`` or ``WORLD_SIZE / NNODES``
   processes per node), as Lightning launches its processes; else it is ``SLURM_PROCID`` when
   ``SLURM_NTASKS`` equals ``WORLD_SIZE`` (SLURM's tasks are then the processes);
3. SLURM's ``SLURM_NTASKS`` / ``SLURM_PROCID``, when no launcher variable is set;
4. a single process.

SLURM's variables are never compared with the launcher's: torchrun (or DeepSpeed, accelerate)
started by ``srun`` with one task per node leaves ``SLURM_PROCID`` at the node's index and
``SLURM_NTASKS`` at the node count while ``RANK`` / ``WORLD_SIZE`` count the processes, and both
are right. ``NNODES`` (upstream's node count) does not change which samples a rank reads here
(the split is by global rank alone); it is checked and kept as ``num_nodes``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from litdata_io.internal import freeze_inherited

__all__ = ["DistributedEnv", "WorkerEnv", "logger", "notice_drop_last"]

# Upstream LitData's dataset logger: what a dataset logs goes here, so logging set up for upstream
# (levels, filters, handlers) applies.
logger = logging.getLogger("litdata.streaming.dataset")

_LAUNCHER = ("WORLD_SIZE", "RANK", "GLOBAL_RANK")
_FIX = "unset the one that is stale, or make them equal"


def _int(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def _same(env: Mapping[str, str], names: tuple[str, str], meaning: str) -> tuple[str, int] | None:
    """The one value that the variables ``names`` (which mean the same thing) give, with the name it came from."""
    found = [(name, value) for name in names if (value := _int(env, name)) is not None]
    if len(found) == 2 and found[0][1] != found[1][1]:
        (a, x), (b, y) = found
        raise ValueError(
            f"{a}={x} and {b}={y} disagree: both give {meaning}. {_FIX.capitalize()} "
            "(an initialised torch.distributed decides instead when it is set up before the dataset is made)"
        )
    return found[0] if found else None


def _from_local_rank(env: Mapping[str, str], world: int) -> tuple[str, int] | None:
    """The global rank from ``LOCAL_RANK`` and the node, as Lightning's own launcher leaves them."""
    local = _int(env, "LOCAL_RANK")
    if local is None:
        return None
    node = _same(env, ("NODE_RANK", "GROUP_RANK"), "this node's index")
    if node is None or node[1] == 0:
        return ("LOCAL_RANK", local)
    per_node = _int(env, "LOCAL_WORLD_SIZE")
    nodes = _int(env, "NNODES")
    if per_node is None and nodes and world % nodes == 0:
        per_node = world // nodes
    if per_node is None:
        raise ValueError(
            f"WORLD_SIZE={world}, LOCAL_RANK={local} and {node[0]}={node[1]} do not say this process's global "
            "rank (the processes per node are unknown): set RANK (or GLOBAL_RANK), or LOCAL_WORLD_SIZE or NNODES"
        )
    return (f"{node[0]} * {per_node} + LOCAL_RANK", node[1] * per_node + local)


@dataclass(frozen=True)
class DistributedEnv:
    """The global rank and world size, from an initialised torch.distributed or the environment (see the module)."""

    world_size: int
    global_rank: int
    num_nodes: int = 1

    @classmethod
    def detect(cls) -> DistributedEnv:
        """This process's place: torch.distributed when it is initialised, else the environment.

        Raises:
            ValueError: two variables that mean the same disagree, a value is not an integer, or the
                rank is outside the world.
        """
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            world = dist.get_world_size()
            try:  # only informative here: a stale NNODES must not stop a job torch.distributed describes
                nodes = _nodes(os.environ, world)
            except ValueError:
                nodes = 1
            return cls(world, dist.get_rank(), nodes)
        return cls.from_environ(os.environ)

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> DistributedEnv:
        """The rank and world size the variables in ``env`` (e.g. ``os.environ``) give, not torch.distributed.

        Raises:
            ValueError: two variables that mean the same disagree, a value is not an integer, or the
                rank is outside the world.
        """
        if any(_int(env, name) is not None for name in _LAUNCHER):
            world_var, world = "WORLD_SIZE", _int(env, "WORLD_SIZE")
            if world is None:
                world_var, world = "WORLD_SIZE (unset)", 1
            if world < 1:
                raise ValueError(f"WORLD_SIZE={world}: the number of processes must be at least 1")
            rank = _same(env, ("RANK", "GLOBAL_RANK"), "this process's global rank") or _from_local_rank(env, world)
            if rank is None:
                procid, ntasks = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
                if procid is not None and ntasks == world:
                    rank = ("SLURM_PROCID", procid)
                elif world == 1:
                    rank = ("the default", 0)
                else:
                    raise ValueError(
                        f"WORLD_SIZE={world} says this is one of {world} processes but no variable says which: "
                        "set RANK (or GLOBAL_RANK) in each process, or initialise torch.distributed before "
                        "making the dataset"
                    )
        else:
            world_var, world = "SLURM_NTASKS", _int(env, "SLURM_NTASKS")
            if world is None:
                world_var, world = "the default", 1
            procid = _int(env, "SLURM_PROCID")
            rank = ("SLURM_PROCID", procid) if procid is not None else ("the default", 0)
        if world < 1:
            raise ValueError(f"{world_var}={world}: the number of processes must be at least 1")
        if not 0 <= rank[1] < world:
            raise ValueError(
                f"rank {rank[1]} (from {rank[0]}) is outside a world of {world} processes (from {world_var}): "
                "set WORLD_SIZE to the number of processes and RANK to 0 .. WORLD_SIZE - 1"
            )
        return cls(world, rank[1], _nodes(env, world))


def _nodes(env: Mapping[str, str], world: int) -> int:
    nodes = _int(env, "NNODES")
    if nodes is None:
        return 1
    if not 1 <= nodes <= world:
        raise ValueError(f"NNODES={nodes} does not fit a world of {world} processes: it must be 1 .. {world}")
    return nodes


@dataclass(frozen=True)
class WorkerEnv:
    """This DataLoader worker's id and the number of workers (1 and 0 in the main process)."""

    world_size: int
    rank: int

    @classmethod
    def detect(cls) -> WorkerEnv:
        """This worker's place, from torch's worker info (1 and 0 outside a worker).

        In a worker it also freezes what the process holds (:func:`litdata_io.internal.freeze_inherited`).
        """
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is None:
            return cls(1, 0)
        freeze_inherited()
        return cls(info.num_workers, info.id)


def notice_drop_last(drop_last: bool, world_size: int) -> None:
    """Log, as upstream does, that ``drop_last=False`` on several ranks may give ranks unequal batches."""
    if not drop_last and world_size > 1:
        # A log record, as upstream (its words first): a configuration to know about, not a mistake.
        logger.warning(
            "You're operating within a distributed environment and have disabled the `drop_last` option. "
            "Please note that this configuration may lead to training interruptions if your system depends "
            "on distributed collectives. (Ranks may get different numbers of batches, and a collective "
            "operation in the training step can then hang; prefer drop_last=True.)"
        )
