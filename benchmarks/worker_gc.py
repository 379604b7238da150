"""Not a suite row: workers whose code keeps many objects, ours vs upstream (and a baseline).

A worker's full garbage collections walk every object it holds: what it inherited from the process
it was forked from (a forkserver that imported torch: ~190k objects; a training process: its model,
tokenizer and lists) or imported, and marking them copies their pages out of the memory it shares
with its parent. Ours freezes what a worker holds when it starts (``gc.freeze()``: optimize/map
workers, Ray's worker actors at their first batch, DataLoader workers at their first pass: one
function, ``litdata_io.internal.freeze_inherited``). The runner (``runners/gc_runner.py``) imports torch, then

* ``optimize``: calls ``litdata.optimize`` with 2 workers over ``--inputs`` inputs;
* ``ray``: the same with ``executor="ray"`` (a local Ray cluster, 2 worker actors that each run
  several batches; ours and the baseline only: upstream has no Ray executor);
* ``stream``: builds ``--heap`` small lists (the training process's objects), then reads a dataset
  of ``--inputs`` samples through a ``StreamingDataset`` subclass and torch's ``DataLoader`` (2
  forked workers);

each input keeping ``--per-input`` small dicts until it returns. Reported: the run's wall time, the
workers' CPU-seconds, the largest private memory of a worker, medians of the rounds, each library in
turn within a round.

    uv run python -m benchmarks.worker_gc                       # ours vs upstream, 100 and 400 inputs
    uv run python -m benchmarks.worker_gc --baseline 66fd61d    # also ours at that commit
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._venvs import build_baseline, build_peer

ROOT = Path(__file__).resolve().parents[1]

RUNNER = ROOT / "benchmarks" / "runners" / "gc_runner.py"
OUT = ROOT / "benchmarks" / "out" / "worker_gc"
RESULT = "BENCH_RESULT "
METRICS = (("elapsed_s", "wall s"), ("worker_cpu_s", "workers' CPU-s"), ("private_mb", "private MB per worker"))


def run_one(python: str, workload: str, inputs: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One fresh process of the runner; its result line."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    params = {"workload": workload, "inputs": inputs, "per_input": args.per_input, "heap": args.heap, "workers": 2,
              "out_dir": str(work / "out"), "stats_dir": str(work / "stats")}  # fmt: skip
    if workload == "stream":
        params["data_dir"] = str(dataset(inputs))
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    command = [python, str(RUNNER), json.dumps(params)]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"{python} {RUNNER.name}: exit {done.returncode}: " + " | ".join(tail))
    shutil.rmtree(work, ignore_errors=True)
    return json.loads(lines[-1][len(RESULT) :])


def dataset(samples: int) -> Path:
    """A dataset of ``samples`` samples ``(i, 0)`` for the stream workload, written once by ours."""
    folder = OUT / f"data-{samples}"
    if not (folder / "index.json").exists():
        from litdata import optimize

        shutil.rmtree(folder, ignore_errors=True)
        optimize(fn=_index_sample, inputs=list(range(samples)), output_dir=str(folder), chunk_size=50,
                 num_workers=1, verbose=False)  # fmt: skip
    return folder


def _index_sample(index: int) -> tuple[int, int]:
    return (index, 0)  # a tuple: PyTree items, which upstream reads without pyarrow (its venv has none)


Key = tuple[str, str, int]


def workload_libs(workload: str, libs: list[str]) -> list[str]:
    """The libraries that can run ``workload`` (upstream has no Ray executor)."""
    return [lib for lib in libs if not (workload == "ray" and lib == "upstream")]


def render(results: dict[Key, list[dict[str, Any]]], libs: list[str], cases: list[tuple[str, int]]) -> str:
    """One table: per workload, size and library, the medians; ours' ratio to each other library."""
    head = "| workload | inputs | library | " + " | ".join(label for _, label in METRICS) + " |"
    lines = [head, "|---|---:|---|" + "---:|" * len(METRICS)]
    for workload, size in cases:
        here = workload_libs(workload, libs)
        for lib in here:
            runs = results[(workload, lib, size)]
            cells = [f"{statistics.median(r[key] for r in runs):.2f}" for key, _ in METRICS]
            lines.append(f"| {workload} | {size} | {lib} | " + " | ".join(cells) + " |")
        for other in here[1:]:
            ratios = []
            for key, _ in METRICS:
                ours = statistics.median(r[key] for r in results[(workload, "ours", size)])
                theirs = statistics.median(r[key] for r in results[(workload, other, size)])
                ratios.append(f"{theirs / ours:.2f}x")
            lines.append(f"| {workload} | {size} | {other} / ours | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inputs", default="100,400", help="comma-separated sizes (inputs per call)")
    parser.add_argument("--per-input", type=int, default=20_000, help="small dicts each input keeps")
    parser.add_argument("--workloads", default="optimize,stream", help="comma-separated: optimize,stream,ray")
    parser.add_argument("--heap", type=int, default=1_000_000, help="stream: small lists the training process holds")
    parser.add_argument("--baseline", default=None, help="also ours at this git revision")
    args = parser.parse_args()
    pythons = {"ours": sys.executable, "upstream": str(build_peer("upstream"))}
    if args.baseline:
        pythons["baseline"] = str(build_baseline(args.baseline).python)
    libs = list(pythons)
    # `uv run` among our ancestors: Ray would pack this checkout into every job's environment
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    sizes = [int(s) for s in args.inputs.split(",") if s.strip()]
    cases = [(w.strip(), size) for w in args.workloads.split(",") if w.strip() for size in sizes]
    results: dict[Key, list[dict[str, Any]]] = {}
    started = time.time()
    for workload, size in cases:
        for round_no in range(args.rounds):
            for lib in workload_libs(workload, libs):  # in turn, so a drift of the machine hits every library alike
                result = run_one(pythons[lib], workload, size, args, OUT / lib)
                results.setdefault((workload, lib, size), []).append(result)
                shown = " ".join(f"{key}={result[key]:.2f}" for key, _ in METRICS)
                print(f"[{workload} {size} inputs r{round_no}] {lib}: {shown}", flush=True)
    command = "uv run python -m benchmarks.worker_gc " + " ".join(sys.argv[1:])
    print(
        f"\nRun: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, `{command.strip()}`, "
        f"{args.rounds} rounds, {args.per_input} dicts kept per input, heap {args.heap}, medians.\n"
    )
    print(render(results, libs, cases))


if __name__ == "__main__":
    main()
