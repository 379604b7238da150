"""What read-ahead of the next local chunks gains on a cold page cache: ours with and without it, and upstream.

The suite's row ``stream-local-cold-w2`` measures the same against upstream and Mosaic on
workload 1's dataset; this script adds ours without read-ahead and big chunks. A dataset of big
chunks is written once; before every run its pages are dropped from the page cache with
``posix_fadvise(POSIX_FADV_DONTNEED)`` (no privilege needed, and other processes' files are left
alone, unlike ``drop_caches``), so every run reads from the disk as a dataset larger than the
page cache would. Each run is a fresh process that streams the dataset with a StreamingDataLoader
(workers and batch size as given) and spends ``--work-ms`` per sample (a sleep: the training step,
which leaves the cores free), so the disk's reads either overlap the work (read-ahead) or wait
(no read-ahead). Configurations, in rotating order each round:

- ``ours``: this checkout, read-ahead on (``max_pre_download=2`` chunks per worker, the default);
- ``ours-off``: this checkout with ``max_pre_download=0`` (no read-ahead);
- ``upstream``: LitData 0.2.76 (the side venv of ``tests/support/upstream_venv.py``), its defaults.

    uv run python -m benchmarks.readahead --chunks 24 --chunk-mib 32 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._inputs import evict_page_cache

ROOT = Path(__file__).resolve().parents[1]

RUN = r"""
import json, sys, time
params = json.loads(sys.argv[1])
from litdata import StreamingDataLoader, StreamingDataset


def collate(batch):
    # The per-sample work (a transform, a training step), in the workers: a sleep leaves the cores free.
    time.sleep(params["work_s"] * len(batch))
    return [len(item["blob"]) for item in batch]


started = time.perf_counter()
dataset = StreamingDataset(params["folder"], shuffle=params["shuffle"], seed=1, **params["options"])
loader = StreamingDataLoader(dataset, batch_size=params["batch"], num_workers=params["workers"], collate_fn=collate)
first = None
items = 0
for batch in loader:
    if first is None:
        first = time.perf_counter() - started
    items += len(batch)
elapsed = time.perf_counter() - started
print(json.dumps({"items": items, "elapsed_s": elapsed, "first_batch_s": first}))
"""


def write_dataset(folder: Path, chunks: int, chunk_mib: int, items_per_chunk: int) -> None:
    """``chunks`` chunks of ``chunk_mib`` MiB of random bytes, written by ours (upstream reads the format)."""
    from litdata_format import BinaryWriter

    if (folder / "index.json").exists():
        return
    item_bytes = chunk_mib * 2**20 // items_per_chunk
    writer = BinaryWriter(folder, chunk_size=items_per_chunk)
    for index in range(chunks * items_per_chunk):
        writer.add_item(index, {"i": index, "blob": os.urandom(item_bytes)})
    writer.done()
    writer.merge()


def run(python: str, folder: Path, options: dict[str, object], args: argparse.Namespace) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LITDATA_"))}
    with tempfile.TemporaryDirectory(prefix="readahead-") as scratch:
        env["LITDATA_CACHE_DIR"] = scratch
        path = Path(scratch) / "run.py"
        path.write_text(RUN)
        params = {"folder": str(folder), "options": options, "batch": args.batch_size, "workers": args.workers,
                  "work_s": args.work_ms / 1000, "shuffle": args.shuffle}  # fmt: skip
        command = [python, str(path), json.dumps(params)]
        out = subprocess.run(command, check=False, capture_output=True, text=True, env=env, cwd=scratch, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"{python} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=24)
    parser.add_argument("--chunk-mib", type=int, default=32)
    parser.add_argument("--items-per-chunk", type=int, default=32)
    parser.add_argument("--work-ms", type=float, default=4.0, help="time spent per sample (a sleep)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--shuffle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="shuffle (samples in random order within each chunk: the mmap faults are random)",
    )
    parser.add_argument("--libs", default="ours,ours-off,upstream")
    parser.add_argument("--folder", type=Path, default=ROOT / "benchmarks" / "out" / "readahead")
    args = parser.parse_args(argv)
    folder = args.folder / f"{args.chunks}x{args.chunk_mib}MiB"
    write_dataset(folder, args.chunks, args.chunk_mib, args.items_per_chunk)
    configs: dict[str, tuple[str, dict[str, object]]] = {
        "ours": (sys.executable, {}),
        "ours-off": (sys.executable, {"max_pre_download": 0}),
    }
    if "upstream" in args.libs:
        from tests.support.upstream_venv import upstream_python

        configs["upstream"] = (str(upstream_python()), {})
    names = [name for name in args.libs.split(",") if name in configs]
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            evict_page_cache(folder)
            python, options = configs[name]
            result = run(python, folder, options, args)
            results[name].append(result)
            print(f"round {round_} {name}: {result['items'] / result['elapsed_s']:,.1f} samples/s", flush=True)
    total_mib = args.chunks * args.chunk_mib
    setup = (
        f"{total_mib} MiB in {args.chunks} chunks, cold page cache each run, shuffle={args.shuffle}, "
        f"{args.work_ms} ms of work per sample, {args.workers} workers, batch {args.batch_size}, {args.rounds} rounds"
    )
    print(f"\n{setup} (median)")
    print("| configuration | samples/s | MiB/s | first batch (s) | vs ours-off, per round: median (min-max) |")
    print("|---|---|---|---|---|")
    for name in names:
        rate = statistics.median(r["items"] / r["elapsed_s"] for r in results[name])
        seconds = statistics.median(r["elapsed_s"] for r in results[name])
        first = statistics.median(r["first_batch_s"] for r in results[name])
        ratio = "-"
        if "ours-off" in results:  # the rounds' own ratios: the machine's load drifts between rounds
            pairs = [
                off["elapsed_s"] / run["elapsed_s"] for run, off in zip(results[name], results["ours-off"], strict=True)
            ]
            ratio = f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})"
        print(f"| {name} | {rate:,.1f} | {total_mib / seconds:,.1f} | {first:.2f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
