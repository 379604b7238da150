"""Scale: datasets of 1k to 1M small chunks, ours vs upstream LitData 0.2.76, in one run.

Usage (from the repository root)::

    uv run python -m benchmarks.scale                                # 1k, 10k, 100k chunks
    uv run python -m benchmarks.scale --sizes 1000,10000,100000,1000000 --epoch-max 100000
    uv run python -m benchmarks.scale --libs ours --sizes 100000     # no side venv needed
    uv run python -m benchmarks.scale --sizes 100000 --workers 4 --skip open   # the epoch with 4 workers
    uv run python -m benchmarks.scale --upstream-python /path/to/venv/bin/python
    uv run python -m benchmarks.scale --sizes 100000 --replicate-index 10 --skip epoch-w0,epoch-w2   # + a 1M index

``--replicate-index K`` adds a point of ``K * n`` chunks for the largest size ``n``: an
``index.json`` written in ``benchmarks/out/scale/`` (the folder above the datasets) that lists
the ``n``-chunk dataset's entries ``K`` times, named ``data-{n}/chunk-...`` (chunk ``i`` is file
``i % n``), so open, plan and state run on a ``K * n``-chunk index without writing ``K * n``
files (creating a file costs 0.3-0.9 ms of kernel time here); no epoch is run at that point.

Each dataset is written once under ``benchmarks/out/scale/`` by ``BinaryWriter(chunk_size=4)``:
``4 * chunks`` samples ``{"i": int, "x": int32[4]}`` (upstream reads the format as written). Every
measurement runs in a fresh process of the library's own venv (the same stdlib-only child code
here, under each venv's ``import litdata``), the libraries alternating per size:

- ``open``: ``StreamingDataset(dir, shuffle=True)`` and ``len()`` (the index on local disk, the
  page cache warm), the process's RSS before it (after the imports), its peak RSS right after
  and the RSS it keeps;
- ``plan``: a shuffled epoch's plan for 2 workers, built anew (ours: ``epoch_order`` and
  ``loader_plan``; upstream: ``shuffler.get_chunks_and_intervals_per_workers`` for a fresh epoch);
- ``state``: ``StreamingDataLoader.state_dict()`` after one batch, and its size as JSON;
- ``epoch-w0`` / ``epoch-w2``: one whole epoch through ``StreamingDataLoader(batch_size=256,
  num_workers=0 / 2)`` (open excluded), every sample checked exactly once, with the peak PSS of
  the process tree (``runners/_common.Sampler``).

The growth exponent of a metric is the slope of ``log(value)`` over ``log(chunks)`` (least squares
over the sizes measured): 1 is linear, 0 is constant. Results go to ``benchmarks/out/scale/results.json``
and the Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "scale"
RUNNERS = ROOT / "benchmarks" / "runners"
SAMPLES_PER_CHUNK = 4
METRICS = (
    "open_s",
    "open_cpu_s",
    "base_rss_mb",
    "open_rss_mb",
    "open_rss_now_mb",
    "plan_s",
    "state_s",
    "state_bytes",
    "epoch_w0_s",
    "epoch_w0_cpu_s",
    "pss_w0_mb",
    "epoch_w2_s",
    "epoch_w2_all_cpu_s",
    "pss_w2_mb",
    "epoch_w4_s",
    "epoch_w4_all_cpu_s",
    "pss_w4_mb",
)


# -- the child: runs under each library's venv, imports only litdata and the stdlib ---------------
def _child(lib: str, what: str, data: str, chunks: int) -> dict[str, Any]:
    import resource

    from runners._common import Sampler, peak_rss  # pyright: ignore[reportMissingImports]

    from litdata import StreamingDataLoader, StreamingDataset

    samples = chunks * SAMPLES_PER_CHUNK
    base_rss = _rss_now()
    started, cpu = time.perf_counter(), time.process_time()
    dataset = StreamingDataset(data, shuffle=True)
    count = len(dataset)
    out: dict[str, Any] = {"open_s": time.perf_counter() - started, "open_cpu_s": time.process_time() - cpu}
    out["len"] = count
    if count != samples:
        raise SystemExit(f"{lib}: len() is {count}, expected {samples}")
    if what == "open":
        out["open_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        out["open_rss_now_mb"] = _rss_now()  # what the open keeps (the peak above includes what it freed)
        out["base_rss_mb"] = base_rss  # after the imports, before the open
        out["plan_s"] = _plan_time(lib, dataset)
        loader = StreamingDataLoader(dataset, batch_size=256, num_workers=0)
        batches = iter(loader)
        next(batches)
        started = time.perf_counter()
        state = loader.state_dict()
        out["state_s"] = time.perf_counter() - started
        out["state_bytes"] = len(json.dumps(state, default=str))
        return out
    workers = int(what.rpartition("w")[2])
    loader = StreamingDataLoader(dataset, batch_size=256, num_workers=workers)
    seen = 0
    total = 0
    with Sampler(interval=0.2) as sampler:
        started, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
        for batch in loader:
            values = batch["i"]
            seen += len(values)
            total += int(values.sum())
        out[f"epoch_w{workers}_s"] = time.perf_counter() - started
        out[f"epoch_w{workers}_cpu_s"] = time.process_time() - cpu  # this process only (not the workers)
    # The workers' CPU too: they have exited (the loader shuts them down at the end of the epoch)
    # and been waited for, so the children's usage counts them.
    del loader
    import gc

    gc.collect()
    out[f"epoch_w{workers}_all_cpu_s"] = out[f"epoch_w{workers}_cpu_s"] + _children_cpu() - children
    if seen != samples or total != samples * (samples - 1) // 2:
        raise SystemExit(f"{lib}: the epoch gave {seen} samples (sum {total}), not each of {samples} once")
    out[f"pss_w{workers}_mb"] = peak_rss(sampler)["rss_peak_mb"]
    return out


def _rss_now() -> float:
    """This process's resident set now, in MiB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _epoch_order(dataset: Any, epoch: int) -> Any:
    """Our dataset's order of ``epoch``: its reader's (as each release builds it), or the dataset's own."""
    try:
        from litdata_stream._dataset import reader_of
    except ImportError:  # a release before the ReadSpec
        try:
            from litdata_stream._reader import StreamingReader  # pyright: ignore[reportMissingImports]
        except ImportError:  # a release before the reader module
            return dataset._epoch_order(epoch)
        return StreamingReader(dataset).epoch_order(epoch)
    return reader_of(dataset).epoch_order(epoch)


def _plan_time(lib: str, dataset: Any) -> float:
    started = time.perf_counter()
    if lib == "upstream":
        dataset.set_num_workers(2)
        dataset.set_batch_size(256)
        dataset.shuffler.get_chunks_and_intervals_per_workers(dataset.distributed_env, 2, 256, 7)
    else:
        dataset.set_num_workers(2)
        dataset.set_batch_size(256)
        # Internal methods (a benchmark may call them): the epoch's order and each worker's plan.
        order = _epoch_order(dataset, 7)
        dataset._rank_plans(dataset._topology(num_workers=2, batch_size=256), 7)
        order.within(0)
    return time.perf_counter() - started


# -- the parent ----------------------------------------------------------------------------------
def _write(chunks: int) -> Path:
    folder = OUT / f"data-{chunks}"
    if (folder / "index.json").is_file():
        return folder
    import numpy as np

    from litdata_format import BinaryWriter

    partial = OUT / f".partial-{chunks}"
    if partial.exists():
        import shutil

        shutil.rmtree(partial)
    started = time.perf_counter()
    writer = BinaryWriter(partial, chunk_size=SAMPLES_PER_CHUNK)
    for i in range(chunks * SAMPLES_PER_CHUNK):
        writer.add_item(i, {"i": i, "x": np.full(4, i, dtype=np.int32)})
    writer.done()
    writer.merge()
    partial.rename(folder)
    print(f"[scale] wrote {chunks} chunks in {time.perf_counter() - started:.1f} s", flush=True)
    return folder


def _replicate(folder: Path, copies: int) -> Path:
    """A dataset folder (``OUT``) whose index lists the entries of the dataset in ``folder`` ``copies`` times.

    See ``--replicate-index``; ``OUT/index.json.replicated`` records what the index holds, so it is
    written once.
    """
    target, marker = OUT / "index.json", OUT / "index.json.replicated"
    wanted = f"{folder.name} x{copies}"
    if target.is_file() and marker.is_file() and marker.read_text() == wanted:
        return OUT
    base = json.loads((folder / "index.json").read_bytes())
    started = time.perf_counter()
    # Each entry's JSON once, as the writers write it (sorted keys); the copies repeat the text.
    text = ", ".join(
        json.dumps({**entry, "filename": f"{folder.name}/{entry['filename']}"}, sort_keys=True)
        for entry in base["chunks"]
    )
    partial = OUT / ".index.json.partial"
    with partial.open("w") as handle:
        handle.write('{"chunks": [')
        for copy in range(copies):
            handle.write((", " if copy else "") + text)
        handle.write("], " + json.dumps({"config": base["config"], "updated_at": base.get("updated_at")})[1:])
    partial.replace(target)
    marker.write_text(wanted)
    print(f"[scale] wrote a {len(base['chunks']) * copies}-chunk index in {time.perf_counter() - started:.1f} s")
    return OUT


def lib_python(lib: str, upstream: str | None) -> str:
    """The interpreter that runs ``lib``: this one for ours, ``upstream`` or the side venv's for upstream."""
    if lib == "ours":
        return sys.executable
    if upstream:
        return upstream
    from tests.support.upstream_venv import upstream_python

    return str(upstream_python())


def _run(python: str, lib: str, what: str, data: Path, chunks: int, src: str | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    if src and lib == "ours":  # another checkout's packages, ahead of the editable installs
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in sorted(Path(src).glob("packages/*/src")))
    command = [python, __file__, "--child", lib, what, str(data), str(chunks)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env, cwd=str(OUT))
    lines = [line for line in done.stdout.splitlines() if line.startswith("SCALE ")]
    if done.returncode != 0 or not lines:
        print(f"[scale] {lib} {what} {chunks}: failed\n{done.stderr[-3000:]}", flush=True)
        return {}
    return json.loads(lines[-1][len("SCALE ") :])


def exponent(points: list[tuple[int, float]]) -> float | None:
    """The least-squares slope of log(value) over log(chunks); None with fewer than two points."""
    points = [(n, v) for n, v in points if v and v > 0]
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(v) for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _fmt(value: Any, metric: str) -> str:
    if value is None:
        return "-"
    if metric == "state_bytes":
        return f"{value:,.0f}"
    if metric.endswith("_mb"):
        return f"{value:.0f}"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def table(results: dict[str, dict[int, dict[str, Any]]], sizes: list[int], libs: list[str]) -> str:
    """The Markdown table: a row per metric and library, a column per size, ratios and exponents."""
    head = "| metric | lib | " + " | ".join(f"{n:,} chunks" for n in sizes) + " | exponent |"
    lines = [head, "|" + "---|" * (len(sizes) + 3)]
    for metric in METRICS:
        for lib in libs:
            values = [results.get(lib, {}).get(n, {}).get(metric) for n in sizes]
            slope = exponent([(n, v) for n, v in zip(sizes, values) if v is not None])
            cells = " | ".join(_fmt(v, metric) for v in values)
            lines.append(f"| {metric} | {lib} | {cells} | {'-' if slope is None else f'{slope:.2f}'} |")
        if "ours" in libs and "upstream" in libs:
            ratios = []
            for n in sizes:
                ours = results.get("ours", {}).get(n, {}).get(metric)
                theirs = results.get("upstream", {}).get(n, {}).get(metric)
                ratios.append(f"{theirs / ours:.2f}x" if ours and theirs else "-")
            lines.append(f"| {metric} | upstream / ours | {' | '.join(ratios)} | |")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        lib, what, data, chunks = sys.argv[2:6]
        print("SCALE " + json.dumps(_child(lib, what, data, int(chunks))), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="chunk counts, comma-separated")
    parser.add_argument("--libs", default="ours,upstream")
    parser.add_argument("--epoch-max", type=int, default=100_000, help="no epochs above this many chunks")
    parser.add_argument("--skip", default="", help="measurements to leave out, e.g. epoch-w2")
    parser.add_argument("--workers", default="0,2", help="the epochs' num_workers, comma-separated (e.g. 0,2,4)")
    parser.add_argument("--upstream-python", default=None, help="upstream 0.2.76's python (default: the test venv)")
    parser.add_argument(
        "--replicate-index", type=int, default=0, help="add a point of K x the largest size: its index listed K times"
    )
    parser.add_argument("--label", default="", help="stored with the results (e.g. before / after)")
    parser.add_argument(
        "--ours-src", default=None, help="run ours from this checkout's packages/*/src (e.g. an exported old commit)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    libs = args.libs.split(",")
    skip = set(filter(None, args.skip.split(",")))
    OUT.mkdir(parents=True, exist_ok=True)
    folders = {n: _write(n) for n in sizes}
    if args.replicate_index > 1:
        largest = max(sizes)
        sizes.append(largest * args.replicate_index)
        folders[sizes[-1]] = _replicate(folders[largest], args.replicate_index)
    pythons = {lib: lib_python(lib, args.upstream_python) for lib in libs}
    results: dict[str, dict[int, dict[str, Any]]] = {lib: {} for lib in libs}
    for n in sizes:
        epochs = [f"epoch-w{w}" for w in map(int, args.workers.split(","))]
        kinds = ["open"] + ([] if n > args.epoch_max else epochs)
        for what in [k for k in kinds if k not in skip]:
            for lib in libs:
                found = _run(pythons[lib], lib, what, folders[n], n, args.ours_src)
                if what != "open":
                    found.pop("open_s", None)
                    found.pop("open_cpu_s", None)
                results[lib].setdefault(n, {}).update({k: v for k, v in found.items() if k != "len"})
                print(f"[scale] {lib} {n} {what}: {found}", flush=True)
    record = {"label": args.label, "when": time.strftime("%Y-%m-%d %H:%M:%S"), "sizes": sizes, "results": results}
    with (OUT / "results.jsonl").open("a") as handle:
        handle.write(json.dumps(record) + "\n")
    print(table(results, sizes, libs))


if __name__ == "__main__":
    main()
