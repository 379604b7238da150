"""optimize over millions of small inputs: time to the first chunk, total time and the parent's peak RSS.

Not a suite row (a 10M-input run takes minutes). Each run is a fresh interpreter (ours: this
workspace's python; upstream 0.2.76: the side venv of ``tests/support/upstream_venv.py``) that runs
``litdata.optimize(identity, inputs, out, chunk_size=..., num_workers=2)`` over ``range(n)``, a
generator of ``n`` ints or ``list(range(n))`` (upstream 0.2.76 refuses the first two), while a
thread polls ``out`` for the first chunk file. The peak RSS is the driver's own (``ru_maxrss`` of
the parent, not its workers): what holding the inputs costs. A run past ``--timeout`` is recorded
as not finished.

    uv run python -m benchmarks.prep_scale                       # 1M and 10M, every kind, ours and upstream
    uv run python -m benchmarks.prep_scale --sizes 1000000 --libs ours
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_DRIVER = """
import json, os, resource, sys, threading, time
import litdata

def identity(i):
    return i

def generated(n):
    for i in range(n):
        yield i

def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def watch(out, start):
    # One line as soon as the first chunk is there, then the peak RSS every 2 s: a run stopped
    # by the timeout still tells both.
    first = None
    while True:
        if first is None:
            try:
                if any(name.startswith("chunk-") for name in os.listdir(out)):
                    first = time.perf_counter() - start
                    print(json.dumps({"first_chunk_s": first, "peak_rss_mb": rss_mb()}), flush=True)
            except FileNotFoundError:
                pass
        else:
            print(json.dumps({"first_chunk_s": first, "peak_rss_mb": rss_mb()}), flush=True)
        time.sleep(0.05 if first is None else 2.0)

if __name__ == "__main__":
    n, kind, out, chunk_size = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    start = time.perf_counter()
    inputs = range(n) if kind == "range" else list(range(n)) if kind == "list" else generated(n)
    threading.Thread(target=watch, args=(out, start), daemon=True).start()
    error = None
    try:
        litdata.optimize(identity, inputs, out, chunk_size=chunk_size, num_workers=2, verbose=False)
    except Exception as err:
        error = f"{type(err).__name__}: {err}"[:300]
    total = time.perf_counter() - start
    samples = None
    if error is None:
        index = json.load(open(os.path.join(out, "index.json")))
        samples = sum(c["chunk_size"] for c in index["chunks"])
    print(json.dumps({"total_s": total, "samples": samples, "error": error, "peak_rss_mb": rss_mb()}), flush=True)
"""


def _python(lib: str) -> str:
    if lib == "ours":
        return sys.executable
    from tests.support.upstream_venv import upstream_python

    return str(upstream_python())


def run_one(lib: str, n: int, kind: str, chunk_size: int, timeout: float) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="prep-scale-"))
    script = folder / "driver.py"
    script.write_text(_DRIVER)
    out = folder / "out"
    command = [_python(lib), str(script), str(n), kind, str(out), str(chunk_size)]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # Its own session: a run past the timeout is stopped with every process it started.
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=folder, start_new_session=True
    )
    note = ""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        note = f"stopped at {timeout:.0f} s"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result: dict[str, object] = {}
    for line in stdout.strip().splitlines():
        if line.startswith("{"):
            result.update(json.loads(line))
    if not note and proc.returncode != 0:
        note = f"exit {proc.returncode}: {stderr.strip().splitlines()[-1:]}"
    if note:
        result["error"] = note
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument(
        "--kinds", nargs="+", default=["range", "generator", "list"], choices=["range", "generator", "list"]
    )
    parser.add_argument("--libs", nargs="+", default=["ours", "upstream"], choices=["ours", "upstream"])
    parser.add_argument("--chunk-size", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    print("| inputs | kind | lib | first chunk (s) | total (s) | parent peak RSS (MB) | samples | note |")
    print("|---:|---|---|---:|---:|---:|---:|---|")
    for n in args.sizes:
        for kind in args.kinds:
            for lib in args.libs:
                started = time.perf_counter()
                r = run_one(lib, n, kind, args.chunk_size, args.timeout)
                first = r.get("first_chunk_s")
                cells = [
                    f"{n:,}",
                    kind,
                    lib,
                    f"{first:.1f}" if isinstance(first, float) else "-",
                    f"{r['total_s']:.1f}" if isinstance(r.get("total_s"), float) else "-",
                    f"{r['peak_rss_mb']:.0f}" if isinstance(r.get("peak_rss_mb"), float) else "-",
                    str(r.get("samples", "-")),
                    str(r.get("error") or ""),
                ]
                print("| " + " | ".join(cells) + " |", flush=True)
                if r.get("error") and time.perf_counter() - started > args.timeout * 0.9:
                    continue


if __name__ == "__main__":
    main()
