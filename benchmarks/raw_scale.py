"""Raw scale: index a local folder of N small files with StreamingRawDataset, ours vs upstream 0.2.76.

Usage (from the repository root)::

    uv run python -m benchmarks.raw_scale                               # 100k and 1M files
    uv run python -m benchmarks.raw_scale --sizes 10000,100000 --libs ours
    uv run python -m benchmarks.raw_scale --sizes 0 --s3 20000       # a bucket prefix on moto only
    git archive OLD packages | tar -x -C /tmp/old && uv run python -m benchmarks.raw_scale --ours-src /tmp/old

Each folder (``benchmarks/out/raw_scale/files-<N>``, or under ``--root``) holds N empty files,
1000 per subfolder, made once with ``os.mknod`` (1M files take ~1M inodes and a few minutes; delete
the folder afterwards with ``--clean``). Every measurement runs in a fresh process of the
library's venv, the libraries alternating per size, with an empty cache folder and no index in the
data folder (upstream writes one there for a local folder; it is removed before each run):

- ``index s`` / ``index cpu s``: ``StreamingRawDataset(folder)`` and ``len()``: listing the folder,
  writing the index;
- ``peak MiB``: the process's peak RSS during that, above its RSS after ``import litdata`` (torch
  included); ``kept MiB``: the RSS left above it afterwards (the file list);
- ``reopen s`` / ``reopen cpu s``: a second ``StreamingRawDataset(folder)`` in the same process,
  from the cached index.

``--s3 N`` adds a row for a bucket prefix of N empty objects on a local moto S3 server (started
with ``tests/support/servers.py``; uploading takes ~5 ms per object here, so 1M objects are out of reach:
use 10k-100k). Upstream lists buckets through fsspec, which needs ``s3fs``; its side venv has
none, so its S3 row records the error.

The ratio columns are upstream / ours (above 1: ours is faster or smaller). Results go to
``benchmarks/out/raw_scale/results.json`` and the Markdown table to stdout. Note the machine's load
with the numbers: wall times on a shared machine move with it, CPU times much less.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "raw_scale"
PER_FOLDER = 1000

CHILD = r"""
import json, os, resource, sys, time
folder, cache, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
index = os.path.join(folder, "index.json.zstd")
if os.path.exists(index):
    os.remove(index)
from litdata import StreamingRawDataset
kwargs = {"storage_options": options} if options else {}

def rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

base = rss()
started, cpu = time.perf_counter(), time.process_time()
dataset = StreamingRawDataset(folder, cache_dir=cache, **kwargs)
count = len(dataset)
index_s, index_cpu = time.perf_counter() - started, time.process_time() - cpu
kept = rss() - base
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
started, cpu = time.perf_counter(), time.process_time()
again = StreamingRawDataset(folder, cache_dir=cache, **kwargs)
reopen_s, reopen_cpu = time.perf_counter() - started, time.process_time() - cpu
assert len(again) == count
if os.path.exists(index):
    os.remove(index)
print(json.dumps({"files": count, "index_s": index_s, "index_cpu_s": index_cpu, "peak_mib": peak,
                  "kept_mib": kept, "reopen_s": reopen_s, "reopen_cpu_s": reopen_cpu}))
"""


def _make(root: Path, count: int) -> Path:
    folder = root / f"files-{count}"
    if folder.is_dir():
        return folder
    partial = root / f".files-{count}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    for first in range(0, count, PER_FOLDER):
        sub = partial / f"d{first // PER_FOLDER:05d}"
        sub.mkdir(parents=True)
        for i in range(first, min(first + PER_FOLDER, count)):
            os.mknod(sub / f"file-{i:08d}.bin")
    partial.rename(folder)
    print(f"[raw_scale] made {count:,} files in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def _run(
    python: str, lib: str, folder: Path | str, src: str | None, timeout: float, options: dict[str, str] | None = None
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    if src and lib == "ours":  # another checkout's packages, ahead of the editable installs
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in sorted(Path(src).glob("packages/*/src")))
    with tempfile.TemporaryDirectory(prefix="raw-scale-cache-") as cache:
        try:
            proc = subprocess.run(
                [python, "-c", CHILD, str(folder), cache, json.dumps(options or {})],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            if isinstance(folder, Path):
                (folder / "index.json.zstd").unlink(missing_ok=True)
            return {"error": f"did not finish in {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cell(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _upload_s3(count: int) -> tuple[Any, str, dict[str, str]]:
    """Start moto, fill a prefix with ``count`` empty objects; the server's context, the URL and options."""
    import asyncio

    from litdata_io import get_storage
    from litdata_io.internal import run_sync
    from tests.support.servers import start_moto

    context = start_moto()
    server = context.__enter__()
    url = f"s3://{server.create_bucket()}/files"
    options = server.storage_options()
    storage = get_storage(url, options)
    started = time.perf_counter()

    async def put_all() -> None:
        for first in range(0, count, 500):
            keys = [f"d{i // PER_FOLDER:05d}/file-{i:08d}.bin" for i in range(first, min(first + 500, count))]
            await asyncio.gather(*(storage.aput(key, b"") for key in keys))

    run_sync(put_all())
    print(f"[raw_scale] uploaded {count:,} objects to moto in {time.perf_counter() - started:.0f} s", flush=True)
    return context, url, options


_COLUMNS = (
    ("index s", "index_s", 2),
    ("index cpu s", "index_cpu_s", 2),
    ("peak MiB", "peak_mib", 0),
    ("kept MiB", "kept_mib", 0),
    ("reopen s", "reopen_s", 2),
    ("reopen cpu s", "reopen_cpu_s", 2),
)


def _table(results: dict[str, dict[int, dict[str, Any]]], sizes: list[int], libs: list[str]) -> str:
    rows = [
        "| files | lib | " + " | ".join(title for title, _, _ in _COLUMNS) + " |",
        "|---:|---|" + "---:|" * len(_COLUMNS),
    ]
    for n in sizes:
        where = f"{n:,}" if n > 0 else f"{-n:,} (S3 moto)"
        for lib in libs:
            found = results[lib].get(n, {})
            if "error" in found:
                rows.append(f"| {where} | {lib} | not run: {found['error']} |" + " |" * (len(_COLUMNS) - 1))
                continue
            cells = [_cell(found.get(key), digits) for _, key, digits in _COLUMNS]
            rows.append(f"| {where} | {lib} | " + " | ".join(cells) + " |")
        ours, theirs = results.get("ours", {}).get(n, {}), results.get("upstream", {}).get(n, {})
        if "index_s" in ours and "index_s" in theirs:
            ratios = [f"{theirs[key] / ours[key]:.2f}x" if ours[key] > 0 else "-" for _, key, _ in _COLUMNS]
            rows.append(f"| {where} | upstream / ours | " + " | ".join(ratios) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="file counts, comma-separated")
    parser.add_argument("--libs", default="ours,upstream")
    parser.add_argument("--root", default=str(OUT), help="where the folders of files are made")
    parser.add_argument("--upstream-python", default=None, help="upstream 0.2.76's python (default: the test venv)")
    parser.add_argument("--ours-src", default=None, help="run ours from this checkout's packages/*/src")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one run may take (else: not finished)")
    parser.add_argument("--clean", action="store_true", help="delete the folders of files afterwards")
    parser.add_argument("--s3", type=int, default=0, help="also index a moto bucket prefix of this many objects")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if int(s) > 0]
    libs = args.libs.split(",")
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"[raw_scale] load average {load[0]:.1f} on {os.cpu_count()} cores", flush=True)
    from benchmarks.scale import lib_python  # the same choice of interpreter as the chunk-scale script

    pythons = {lib: lib_python(lib, args.upstream_python) for lib in libs}
    results: dict[str, dict[int, dict[str, Any]]] = {lib: {} for lib in libs}
    try:
        for n in sizes:
            folder = _make(root, n)
            for lib in libs:
                results[lib][n] = found = _run(pythons[lib], lib, folder, args.ours_src, args.timeout)
                print(f"[raw_scale] {lib} {n:,}: {found}", flush=True)
        if args.s3:
            context, url, options = _upload_s3(args.s3)
            try:
                for lib in libs:
                    found = _run(pythons[lib], lib, url, args.ours_src, args.timeout, options)
                    results[lib][-args.s3] = found
                    print(f"[raw_scale] {lib} s3 {args.s3:,}: {found}", flush=True)
            finally:
                context.__exit__(None, None, None)
            sizes.append(-args.s3)
    finally:
        if args.clean:
            for n in sizes:
                if n > 0:
                    shutil.rmtree(root / f"files-{n}", ignore_errors=True)
    (OUT / "results.json").write_text(json.dumps({"load": load, "results": results}, indent=1))
    print(f"\nload average at start {load[0]:.1f} / end {os.getloadavg()[0]:.1f}\n")
    print(_table(results, sizes, libs))


if __name__ == "__main__":
    main()
