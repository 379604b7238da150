"""One optimize run of ``benchmarks/optimize_gc.py``: an ``fn`` that allocates many objects, after ``import torch``.

Called as ``python gc_runner.py <params-json>`` by ours', the baseline's or upstream's venv python;
prints ``BENCH_RESULT {...}``: the call's seconds, the workers' CPU-seconds (summed) and the largest
private memory a worker had (``Private_*`` of ``/proc/self/smaps_rollup``, after an input).

Each input builds ``per_input`` small dicts and lists and keeps them until ``fn`` returns, as a
parser or a tokenizer's bookkeeping does: enough young objects that the garbage collector runs
full collections now and then. What such a collection walks is what the worker holds besides: the
objects it inherited or imported (torch, the script), unless they are kept out of its reach.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch  # noqa: F401  (a training-data script imports it before optimize, as the docs' examples do)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULT_PREFIX


def _private_kb() -> int:
    with open("/proc/self/smaps_rollup") as handle:
        return sum(int(line.split()[1]) for line in handle if line.startswith(("Private_Clean", "Private_Dirty")))


def fn(index: int) -> dict[str, int]:
    per_input = int(os.environ["GC_BENCH_PER_INPUT"])
    kept = [{"id": [j, str(j)], "span": (j, j + 1)} for j in range(per_input)]
    stats = Path(os.environ["GC_BENCH_STATS"]) / f"{os.getpid()}.json"
    before = json.loads(stats.read_text()) if stats.exists() else {"private_kb": 0}
    stats.write_text(json.dumps({"cpu": time.process_time(), "private_kb": max(before["private_kb"], _private_kb())}))
    return {"index": index, "kept": len(kept)}


if __name__ == "__main__":
    import litdata

    params = json.loads(sys.argv[1])
    stats_dir = Path(params["stats_dir"])
    stats_dir.mkdir(parents=True, exist_ok=True)
    os.environ["GC_BENCH_PER_INPUT"] = str(params["per_input"])
    os.environ["GC_BENCH_STATS"] = str(stats_dir)
    started = time.perf_counter()
    litdata.optimize(
        fn=fn, inputs=list(range(params["inputs"])), output_dir=params["out_dir"], chunk_bytes="16MB",
        num_workers=params["workers"],
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
