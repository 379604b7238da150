"""One run of ``benchmarks/worker_gc.py``: workers whose code keeps many objects, after ``import torch``.

Called as ``python gc_runner.py <params-json>`` by ours', the baseline's or upstream's venv python;
prints ``BENCH_RESULT {...}``: the run's seconds, the workers' CPU-seconds (summed) and the largest
private memory a worker had (``Private_*`` of ``/proc/self/smaps_rollup``, after a sample).

Each input (``optimize``: each call of ``fn``, in optimize's workers or, ``ray``, in the worker actors
of a local Ray cluster; ``stream``: each sample a ``StreamingDataset``
subclass reads, through torch's ``DataLoader`` with 2 workers) builds ``per_input`` small dicts and
lists and keeps them until it returns, as a parser or a tokenizer's bookkeeping does: enough young
objects that the garbage collector runs full collections now and then. What such a collection
walks is what the worker holds besides: the objects it inherited or imported (torch, the script,
and for ``stream`` the training process's ``heap`` small lists, forked into each worker), unless
they are kept out of its reach.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from _common import RESULT_PREFIX


def _private_kb() -> int:
    with open("/proc/self/smaps_rollup") as handle:
        return sum(int(line.split()[1]) for line in handle if line.startswith(("Private_Clean", "Private_Dirty")))


_peak_kb = 0  # this worker's largest private memory so far


def _work(index: int) -> dict[str, int]:
    global _peak_kb
    per_input = int(os.environ["GC_BENCH_PER_INPUT"])
    kept = [{"id": [j, str(j)], "span": (j, j + 1)} for j in range(per_input)]
    _peak_kb = max(_peak_kb, _private_kb())
    stats = Path(os.environ["GC_BENCH_STATS"]) / f"{os.getpid()}.json"
    stats.write_text(json.dumps({"cpu": time.process_time(), "private_kb": _peak_kb}))
    return {"index": index, "kept": len(kept)}


def fn(index: int) -> dict[str, int]:
    return _work(index)


def _stream(params: dict[str, Any]) -> None:
    import litdata

    class Keeping(litdata.StreamingDataset):
        def __getitem__(self, index: Any) -> Any:
            sample = super().__getitem__(index)
            return _work(int(sample[0]))

    heap = [[i, [i]] for i in range(params["heap"])]  # the training process's own objects
    loader = torch.utils.data.DataLoader(Keeping(params["data_dir"]), batch_size=1, num_workers=params["workers"])
    seen = sum(1 for _ in loader)
    assert seen == params["inputs"] and len(heap) == params["heap"], (seen, params)


if __name__ == "__main__":
    import litdata

    params = json.loads(sys.argv[1])
    stats_dir = Path(params["stats_dir"])
    stats_dir.mkdir(parents=True, exist_ok=True)
    os.environ["GC_BENCH_PER_INPUT"] = str(params["per_input"])
    os.environ["GC_BENCH_STATS"] = str(stats_dir)
    started = time.perf_counter()
    if params["workload"] == "stream":
        _stream(params)
    else:
        # ray: a local Ray cluster started by the call, its worker actors running the batches
        executor = {"executor": "ray"} if params["workload"] == "ray" else {}
        litdata.optimize(
            fn=fn, inputs=list(range(params["inputs"])), output_dir=params["out_dir"], chunk_bytes="16MB",
            num_workers=params["workers"], **executor,
        )  # fmt: skip
    elapsed = time.perf_counter() - started
    workers = [json.loads(p.read_text()) for p in stats_dir.glob("*.json")]
    result = {
        "elapsed_s": elapsed,
        "worker_cpu_s": sum(w["cpu"] for w in workers),
        "private_mb": max(w["private_kb"] for w in workers) / 1024,
        "workers": len(workers),
    }
    print(RESULT_PREFIX + json.dumps(result), flush=True)
