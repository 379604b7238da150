"""optimize on a 2-node local Ray cluster vs this machine's worker processes, same total CPUs.

Workloads 1 and 2 of docs/benchmarks.md (records ``{"index": int, "tokens": int32[128]}`` in 8 MiB
chunks; 256x256 JPEG files, PIL-opened, stored as the encoded file, + a label), run alternately
with ``num_workers=2`` worker processes and with ``executor="ray"`` on a
``ray.cluster_utils.Cluster`` of two 1-CPU nodes (started once, before the timed runs; each timed
Ray run includes starting its worker actors). The script re-runs itself inside a network
namespace with only ``lo`` (``unshare -n``), so Ray listens on nothing else.

    uv run python -m benchmarks.ray_cluster --records 200000 --images 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
_INSIDE = "LITDATA_BENCH_RAY_NETNS"


def record(i: int) -> dict[str, Any]:
    return {"index": i, "tokens": np.full(128, i % 30000, dtype=np.int32)}


def image(path: str) -> dict[str, Any]:
    from PIL import Image

    return {"image": Image.open(path), "label": len(path) % 10}


def _make_images(folder: Path, count: int) -> list[str]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    base = np.linspace(0, 255, 256, dtype=np.float32)
    paths = []
    for i in range(count):
        pixels = (base[None, :, None] + rng.normal(0, 12, (256, 256, 3)) + i) % 256
        path = folder / f"img-{i:06d}.jpg"
        Image.fromarray(pixels.astype(np.uint8)).save(path, quality=90)
        paths.append(str(path))
    return paths


def _timed(fn: Any, inputs: list[Any], executor: Any, options: dict[str, Any]) -> float:
    import litdata_prep

    out = tempfile.mkdtemp(prefix="bench-ray-out-")
    try:
        start = time.perf_counter()
        litdata_prep.optimize(fn, inputs, out, num_workers=2, executor=executor, verbose=False, **options)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _inside(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from tests.scripts.ray_job import node_args

    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    workloads = {
        "optimize-records": (record, list(range(args.records)), {"chunk_bytes": "8MB"}),
        "optimize-images": (image, _make_images(work / "images", args.images), {"chunk_bytes": "8MB"}),
    }
    cluster = Cluster(initialize_head=True, head_node_args={**node_args(), "include_dashboard": False})
    results: dict[str, Any] = {}
    try:
        cluster.add_node(**node_args())
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        for name, (fn, inputs, options) in workloads.items():
            times: dict[str, list[float]] = {"processes": [], "ray": []}
            for _ in range(args.rounds):  # alternate, so both see the same machine
                times["processes"].append(_timed(fn, inputs, None, options))
                times["ray"].append(_timed(fn, inputs, "ray", options))
            best = {k: len(inputs) / min(v) for k, v in times.items()}
            median = {k: len(inputs) / statistics.median(v) for k, v in times.items()}
            results[name] = {
                "samples": len(inputs),
                "seconds": times,
                "best_samples_per_s": best,
                "median_samples_per_s": median,
                "ray_vs_processes_median": median["ray"] / median["processes"],
            }
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    results["loadavg_after"] = os.getloadavg()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--images", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.environ.get(_INSIDE):
        print(json.dumps(_inside(args)))
        return
    print("load average before:", os.getloadavg(), file=sys.stderr)
    env = {**os.environ, _INSIDE: "1", "RAY_USAGE_STATS_ENABLED": "0"}
    command = f"ip link set lo up && exec {sys.executable} -m benchmarks.ray_cluster " + " ".join(sys.argv[1:])
    proc = subprocess.run(
        ["unshare", "-rn", "sh", "-c", command], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"the benchmark failed:\n{proc.stderr[-4000:]}")
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))
    for name in ("optimize-records", "optimize-images"):
        r = results[name]
        print(
            f"| {name} (2 x 1-CPU Ray nodes vs 2 processes) | {r['samples']} | "
            f"{r['median_samples_per_s']['processes']:.0f} | {r['median_samples_per_s']['ray']:.0f} | "
            f"{r['ray_vs_processes_median']:.2f}x |"
        )


if __name__ == "__main__":
    main()
