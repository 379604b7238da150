"""A DDP job started as Lightning's ``ddp_spawn`` starts it, for tests/test_ddp_spawn_placement.py.

Run as ``python -m tests.scripts.ddp_spawn ARGS_JSON``: ``torch.multiprocessing.spawn`` starts 2
gloo ranks; each streams the dataset at ``url`` with a StreamingDataLoader of 2 workers (started
with ``spawn`` in such a rank, a fresh pair each epoch) for 2 epochs. Once both of its workers have
delivered a batch, each rank records its process tree (from /proc). Rank 0 prints one JSON line:
per rank, its pid, its obstore helper's pid, the tree, and the indexes it read in each epoch.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist
from torch.multiprocessing.spawn import spawn

from litdata_io._processes import _helper, _process
from litdata_stream import StreamingDataLoader, StreamingDataset

EPOCHS = 2


def children(pid: int) -> list[int]:
    """The child processes of ``pid``, from /proc."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        found.extend(int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    return sorted(found)


def tree(pid: int) -> dict[str, Any]:
    """``pid`` and its descendants."""
    return {"pid": pid, "children": [tree(child) for child in children(pid)]}


def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs in a DataLoader worker: the batch's indexes, who read them, and where its obstore runs."""
    return {
        "indexes": [int(s["index"]) for s in samples],
        "pid": os.getpid(),
        "placement": _process.obstore_placement(),
    }


def rank_main(rank: int, world: int, args: dict[str, Any]) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dataset = StreamingDataset(
        args["url"], storage_options=args["options"], cache_dir=str(Path(args["scratch"]) / f"cache{rank}")
    )
    # No watchdog: its /dev/shm board is not what this job is about.
    loader = StreamingDataLoader(dataset, batch_size=2, num_workers=2, collate_fn=collate, watchdog_s=0)
    epochs: list[list[int]] = []
    snapshot: dict[str, Any] | None = None
    workers: dict[int, str] = {}
    for _ in range(EPOCHS):
        seen: list[int] = []
        for batch in loader:
            seen.extend(batch["indexes"])
            workers[batch["pid"]] = batch["placement"]
            if snapshot is None and len(workers) == 2:  # both workers have made their requests
                snapshot = {"tree": tree(os.getpid()), "workers": sorted(workers)}
        epochs.append(seen)
    connection = _helper._current  # pyright: ignore[reportPrivateUsage]
    mine = {
        "rank": rank,
        "pid": os.getpid(),
        "placement": _process.obstore_placement(),
        "obstore_loaded": "obstore" in sys.modules,
        "helper": connection.proc.pid if connection is not None else None,
        "snapshot": snapshot,
        "placements": sorted(set(workers.values())),
        "epochs": epochs,
    }
    gathered: list[object] = [None] * world
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        print(json.dumps(gathered), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(spec["port"]))
    spawn(rank_main, args=(2, spec), nprocs=2)  # what Lightning's ddp_spawn does
