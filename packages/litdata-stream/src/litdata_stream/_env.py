"""Where this process sits: its rank among the training processes and its DataLoader worker."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DistributedEnv", "WorkerEnv"]


def _env_int(*names: str, default: int) -> int:
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"environment variable {name}={value!r} is not an integer") from None
    return default


@dataclass(frozen=True)
class DistributedEnv:
    """The global rank and world size, from an initialised torch.distributed or the usual env vars."""

    world_size: int
    global_rank: int

    @classmethod
    def detect(cls) -> DistributedEnv:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_world_size(), dist.get_rank())
        world = _env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
        rank = _env_int("RANK", "SLURM_PROCID", default=0)
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} is outside a world of {world} processes (check RANK / WORLD_SIZE)")
        return cls(world, rank)


@dataclass(frozen=True)
class WorkerEnv:
    """This DataLoader worker's id and the number of workers (1 and 0 in the main process)."""

    world_size: int
    rank: int

    @classmethod
    def detect(cls) -> WorkerEnv:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is None:
            return cls(1, 0)
        return cls(info.num_workers, info.id)
