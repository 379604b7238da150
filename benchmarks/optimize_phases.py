"""Not a suite row: optimize's fixed costs, timed by phase, ours vs upstream 0.2.76 vs Mosaic's MDSWriter (issue 32).

Four workloads at 0.25x, 0.5x and 1x of issue 32's sizes, 2 workers, 64 MiB chunks:

* ``bytes``: 5,000 JPEG files; ``fn`` returns ``{"image": <the file's bytes>, "label": int}``;
* ``pil``: the same files, ``fn`` returns the PIL image (stored as the encoded JPEG) + label;
* ``tokens``: 25M int32 tokens in 24 ``.npy`` shards, ``TokensLoader`` (Mosaic: packed 2049-token samples);
* ``records``: 100,000 ``{"index": int, "tokens": int32[128]}``.

Every run is a fresh process of ``runners/phases_runner.py`` under the library's venv, the
libraries alternating inside each round. Its first line is ``import torch``, as in a data-prep
script that also imports a tokenizer, torchvision or the model's code (issue 46; ``ours-notorch``
is ours in a script that never imports torch); the library is imported next, as a script's top
lines import it (``from litdata import optimize``, ``from streaming import MDSWriter``), then
each run reports start-up (call -> first sample),
work (first -> last sample) and tail (last sample -> return); "fixed" is start-up + tail (issue 46
wants it <= 0.1 s), and the tail is split by the output files' change times (set as each file is
renamed into place, to the kernel's tick: 4 ms here) into the last chunk written and published (in
proportion to what the workers held at their last sample), the index published, and the return
(clean-up, joins). ``ours-nopyc`` is ours again with
no compiled bytecode to be found (a fresh empty ``PYTHONPYCACHEPREFIX`` per run: the standard
library's ``.pyc`` too, so an upper bound of what a venv without ``.pyc`` costs); the other runs
get none of this shell's ``PYTHON*`` variables (``PYTHONDONTWRITEBYTECODE=1`` would make every
run compile its modules again), as the suite's runs. The page
cache's sequential write bandwidth is measured in the same run: the same number of bytes as the
largest output, written with one ``write`` per 64 MiB into a new file (median of 3).

``floor`` is no library: the same ``fn`` over the same inputs in a fork pool of 2, each sample
made and dropped (its "MB written" are the bytes the samples held). No library's call can be
shorter, so its "of page cache" is the most the workload allows a whole call to reach.

    uv run python -m benchmarks.optimize_phases                      # all: ~10-20 min on 2 cores
    uv run python -m benchmarks.optimize_phases --rounds 3 --scales 0.5 --workloads bytes,tokens
    uv run python -m benchmarks.optimize_phases --libs ours,ours-nopyc --report /tmp/phases.md
    uv run python -m benchmarks.optimize_phases --libs ours,upstream,mosaic,floor --page   # docs/benchmarks.md
    uv run python -m benchmarks.optimize_phases --libs ours --baseline main --rounds 3   # before/after
    uv run python -m benchmarks.optimize_phases --libs ours --baseline main --rounds 7 --stat min  # a busy machine
    uv run python -m benchmarks.optimize_phases --libs ours --scales 1,4,10 --workloads bytes,tokens  # bigger jobs
    uv run python -m benchmarks.optimize_phases --libs ours,floor --scales 1,4 --workloads bytes,tokens  # fn's floor

A scale above 1x reads the same JPEG files or token shards again, round-robin.

Inputs and runs go under ``benchmarks/out/phases/`` (ignored by git); the Markdown table is
printed and, with ``--report``, written to that file; ``--page`` writes it into its section of
docs/benchmarks.md (the suite's ``benchmarks.run`` keeps that section when it writes the page).
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

import numpy as np

from benchmarks._exec import _env
from benchmarks._inputs import _image, warm_code, warm_page_allocator
from benchmarks._report import PHASES, write_section
from benchmarks._venvs import build_baseline, build_peer

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "benchmarks" / "out" / "phases"
RUNNER = ROOT / "benchmarks" / "runners" / "phases_runner.py"
WORKLOADS = ("bytes", "pil", "tokens", "records")
LIBS = ("ours", "ours-nopyc", "ours-notorch", "baseline", "upstream", "mosaic", "floor")
_BASELINE: list[Path] = []  # the python of ours at --baseline REV
IMAGES = 5_000
TOKEN_SHARDS = 24
TOTAL_TOKENS = 25_000_000
RECORDS = 100_000
CHUNK_BYTES = 64 << 20
BLOCK = 2049
DOC_TOKENS = 2_000
RESULT = "BENCH_RESULT "


def _inputs() -> tuple[Path, Path]:
    images, tokens = OUT / "inputs" / "images", OUT / "inputs" / "tokens"
    if not (OUT / "inputs" / ".ready").exists():
        print("[inputs] generating JPEG files and token shards ...", flush=True)
        shutil.rmtree(OUT / "inputs", ignore_errors=True)
        images.mkdir(parents=True)
        tokens.mkdir(parents=True)
        import multiprocessing

        jobs = [(images / f"img-{i:06d}.jpg", i, 256) for i in range(IMAGES)]
        with multiprocessing.get_context("fork").Pool(2) as pool:
            pool.map(_image, jobs, chunksize=64)
        rng = np.random.default_rng(5)
        for i in range(TOKEN_SHARDS):
            np.save(tokens / f"part-{i:04d}.npy", rng.integers(0, 50257, TOTAL_TOKENS // TOKEN_SHARDS, dtype=np.int32))
        (OUT / "inputs" / ".ready").touch()
    return images, tokens


def _read_through(folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            path.read_bytes()


def page_cache_write_bandwidth(size: int, work: Path) -> float:
    """Bytes/s of writing ``size`` bytes into a new file with one ``write`` per 64 MiB (median of 3)."""
    block = np.random.default_rng(0).bytes(min(size, CHUNK_BYTES))
    warm_page_allocator(work, size)  # as before every optimize run
    rates = []
    for n in range(3):
        path = work / f"bandwidth-{n}.bin"
        started = time.perf_counter()
        with open(path, "wb", buffering=0) as handle:
            left = size
            while left > 0:
                left -= handle.write(memoryview(block)[: min(left, len(block))])
        rates.append(size / (time.perf_counter() - started))
        path.unlink()
    return statistics.median(rates)


def _python(lib: str) -> str:
    if lib == "baseline":
        return str(_BASELINE[0])
    return sys.executable if lib.startswith("ours") or lib == "floor" else str(build_peer(lib))


def _code_roots(libs: list[str]) -> list[Path]:
    """The code the runs import (read into the page cache between runs, as the suite does)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    roots = [ROOT / "packages", Path(sys.base_prefix) / "lib" / version]
    for lib in libs:
        venv = Path(_python(lib)).parent.parent
        roots.extend(sorted(venv.glob("lib/python*/site-packages")))
        if lib == "baseline":
            roots.append(venv.parent / "packages")
    return list(dict.fromkeys(roots))


def run_one(lib: str, workload: str, scale: float, images: Path, tokens: Path, work: Path) -> dict[str, Any]:
    """One fresh process of the runner; its result line."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    params = {
        "out_dir": str(work / "optimized"),
        "phases_dir": str(work / "phases"),
        "workers": 2,
        "chunk_bytes": CHUNK_BYTES,
        "chunk_tokens": (CHUNK_BYTES // 4 // BLOCK) * BLOCK,
        "block": BLOCK,
        "doc_tokens": DOC_TOKENS,
        "images_dir": str(images),
        "tokens_dir": str(tokens),
        "files": round((TOKEN_SHARDS if workload == "tokens" else IMAGES) * scale),
        "records": round(RECORDS * scale),
    }
    # As the suite's runs: no PYTHON* variable of this shell (PYTHONDONTWRITEBYTECODE=1 would make every
    # run compile what it imports inside the clock, ours more than the peers: its imports are lazy); the
    # runner's first line is `import torch` but in ours-notorch; ours-nopyc finds no compiled bytecode.
    env = _env(work, nopyc=lib == "ours-nopyc", torch_first=lib != "ours-notorch")
    runner_lib = lib if lib in ("mosaic", "floor") else "litdata"
    command = [_python(lib), str(RUNNER), runner_lib, workload, json.dumps(params)]
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {done.returncode}: " + " | ".join(tail)}
    result = json.loads(lines[-1][len(RESULT) :])
    shutil.rmtree(work, ignore_errors=True)
    return result


_SPLIT = ("last_chunk_s", "to_index_s", "to_return_s")
_STAT = {"median": statistics.median, "min": min}
_stat = statistics.median  # --stat


def _cell(values: list[float]) -> str:
    return f"{_stat(values):.3f}" if values else "-"


def render(results: dict[tuple[str, str, float], list[dict[str, Any]]], libs: list[str], bandwidth: float) -> str:
    """The Markdown tables: seconds by phase (``--stat`` of the runs), and ours against the best peer."""
    lines = [
        f"Page cache, sequential writes of 64 MiB in this run: **{bandwidth / 1e6:,.0f} MB/s**.",
        "",
        "| workload | scale | library | total s | start-up s | work s | tail s | fixed s | tail: last chunk s "
        "| tail: to index s | tail: to return s | MB written | MB/s | of page cache |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = ["", "| workload | scale | ours / best peer (total s) |", "|---|---|---|"]
    for workload, scale in sorted({(w, s) for w, _, s in results}, key=lambda k: (WORKLOADS.index(k[0]), k[1])):
        totals: dict[str, float] = {}
        for lib in libs:
            runs = [r for r in results.get((workload, lib, scale), []) if "error" in r or r]
            good = [r for r in runs if "error" not in r]
            if not runs:
                continue
            if not good:
                lines.append(f"| {workload} | {scale}x | {lib} | failed: {runs[0]['error'][:120]} |||||||")
                continue
            total = _stat([r["elapsed_s"] for r in good])
            totals[lib] = total
            written = statistics.median(r["bytes"] for r in good)
            cells = [_cell([r[k] for r in good]) for k in ("elapsed_s", "startup_s", "work_s", "tail_s")]
            cells.append(_cell([r["startup_s"] + r["tail_s"] for r in good]))  # issue 46's fixed cost
            cells += [_cell([r[k] for r in good if k in r]) for k in _SPLIT]  # the floor has no files
            rate = written / total
            lines.append(
                f"| {workload} | {scale}x | {lib} ({len(good)}) | {' | '.join(cells)} | {written / 1e6:.0f} | "
                f"{rate / 1e6:.0f} | {rate / bandwidth:.0%} |"
            )
        peers = [totals[p] for p in ("upstream", "mosaic") if p in totals]
        if "ours" in totals and peers:
            ratios.append(f"| {workload} | {scale}x | {min(peers) / totals['ours']:.2f}x |")
    return "\n".join(lines + (ratios if len(ratios) > 3 else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scales", default="0.25,0.5,1")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--libs", default=",".join(LIBS))
    parser.add_argument("--report", type=Path, default=None)
    parser.add_argument("--page", action="store_true", help="also write the table into docs/benchmarks.md")
    parser.add_argument("--baseline", default=None, help="adds ours at this git revision (lib 'baseline')")
    parser.add_argument("--stat", choices=sorted(_STAT), default="median", help="min: the least disturbed run")
    args = parser.parse_args()
    global _stat
    _stat = _STAT[args.stat]
    libs = [lib.strip() for lib in args.libs.split(",") if lib.strip()]
    unknown = set(libs) - set(LIBS)
    if unknown:
        raise SystemExit(f"--libs: unknown {sorted(unknown)}; choose from {LIBS}")
    if args.baseline:
        _BASELINE.append(build_baseline(args.baseline).python)
        libs = [*libs, "baseline"] if "baseline" not in libs else libs
    elif "baseline" in libs:
        raise SystemExit("--libs baseline needs --baseline REV")
    roots = _code_roots(libs)
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    scales = [float(s) for s in args.scales.split(",")]
    images, tokens = _inputs()
    runs = OUT / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    started = time.time()
    for workload in workloads:
        _read_through(tokens if workload == "tokens" else images)
        for scale in scales:
            for round_no in range(args.rounds):
                for lib in libs:  # alternating, so a drift of the machine hits every library alike
                    warm_code(roots)  # at most every 30 s: the kernel pages out code nobody touched
                    warm_page_allocator(runs, 256 << 20)  # every run writes into pages freed just before
                    result = run_one(lib, workload, scale, images, tokens, runs / f"{workload}-{scale}-{lib}")
                    results.setdefault((workload, lib, scale), []).append(result)
                    shown = result.get("error") or " ".join(
                        f"{k[:-2]}={result[k]:.3f}"
                        for k in ("elapsed_s", "startup_s", "work_s", "tail_s", *_SPLIT)
                        if k in result
                    )
                    print(f"[{workload} {scale}x r{round_no}] {lib}: {shown}", flush=True)
    largest = max((r.get("bytes", 0) for rs in results.values() for r in rs), default=CHUNK_BYTES)
    bandwidth = page_cache_write_bandwidth(max(largest, CHUNK_BYTES), runs)
    command = "uv run python -m benchmarks.optimize_phases " + " ".join(sys.argv[1:])
    header = (
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, `{command.strip()}`, "
        f"{args.rounds} round(s), {args.stat} of the runs (their number in brackets), load average "
        f"{os.getloadavg()[0]:.1f} at the end.\n\n"
    )
    report = header + render(results, libs, bandwidth)
    print(report)
    if args.report is not None:
        args.report.write_text(report + "\n")
    if args.page:
        write_section(ROOT / "docs" / "benchmarks.md", PHASES, report)


if __name__ == "__main__":
    main()
