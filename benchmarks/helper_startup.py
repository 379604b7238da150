"""First-request latency of a root process: obstore through the helper vs obstore in-process.

Starts moto on 127.0.0.1, seeds one object, then runs fresh root processes that time their first
``get`` (and a second one) with ``LITDATA_OBSTORE_PROCESS=helper`` and ``=here``, interleaved. The
CPU time of the first request (the root's and the helper's, up to the second request) tells more
than its wall time on a loaded machine.

    uv run python -m benchmarks.helper_startup --rounds 15
    uv run python -m benchmarks.helper_startup --stages --rounds 9

``--stages`` times, stage by stage (wall and CPU), what a fresh-interpreter helper (``python -m
litdata_io._processes._helper``: the fallback where the helper cannot be a fork) does before its first
reply: the interpreter's start, the imports, the client, the first GET.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from tests.support.servers import start_moto

_CHILD = """
import json, os, sys, time
from litdata_io import get_storage
from litdata_io._processes import _helper
storage = get_storage(sys.argv[1], json.loads(sys.argv[2]))
c0 = time.process_time(); t0 = time.perf_counter(); storage.get("obj.bin")
t1 = time.perf_counter(); c1 = time.process_time(); storage.get("obj.bin"); t2 = time.perf_counter()
helper_cpu = 0.0
if _helper._current is not None:  # the helper's CPU seconds so far (utime + stime, in clock ticks)
    fields = open(f"/proc/{_helper._current.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    helper_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
first_cpu = (c1 - c0 + helper_cpu) * 1e3
print(json.dumps({"first_ms": (t1 - t0) * 1e3, "second_ms": (t2 - t1) * 1e3, "first_cpu_ms": first_cpu}))
"""

# What the fresh-interpreter helper does before its first reply, with a (wall, CPU) stamp after each stage.
_STAGES = """
import time
stamps = [("interpreter start", time.time(), time.process_time())]
def stamp(name): stamps.append((name, time.time(), time.process_time()))
import asyncio
stamp("import asyncio")
import litdata_io._processes._helper
stamp("import litdata_io._processes._helper")
import json, pickle, sys
from litdata_io import get_storage
from litdata_io._processes import _process
storage = pickle.loads(pickle.dumps(get_storage(sys.argv[1], json.loads(sys.argv[2]))))
stamp("unpickle the storage (its modules)")
_process.serve_obstore_here()
async def first_request():
    from litdata_io._storage._obstore import _import_obstore
    obstore = _import_obstore()
    stamp("import obstore")
    storage._client()
    stamp("build the client")
    await obstore.get_async(storage._client(), "obj.bin")
    stamp("first GET")
asyncio.run(first_request())
print(json.dumps(stamps))
"""


def _stages(rounds: int, url: str, options: str) -> None:
    rows: list[dict[str, tuple[float, float]]] = []
    for _ in range(rounds):
        started = time.time()
        out = subprocess.run([sys.executable, "-c", _STAGES, url, options], capture_output=True, text=True, check=True)
        wall, cpu, row = started, 0.0, {}
        for name, at, used in json.loads(out.stdout):
            row[name] = ((at - wall) * 1e3, (used - cpu) * 1e3)
            wall, cpu = at, used
        rows.append(row)
    for name in rows[0]:
        wall = statistics.median(r[name][0] for r in rows)
        cpu = statistics.median(r[name][1] for r in rows)
        print(f"{name:36s} wall {wall:7.1f} ms  CPU {cpu:6.1f} ms")
    total_wall = statistics.median(sum(w for w, _ in r.values()) for r in rows)
    total_cpu = statistics.median(sum(c for _, c in r.values()) for r in rows)
    print(f"{'total':36s} wall {total_wall:7.1f} ms  CPU {total_cpu:6.1f} ms ({rounds} processes)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--stages", action="store_true", help="time a fresh-interpreter helper's start by stage")
    args = parser.parse_args()
    with start_moto() as server:
        bucket = server.create_bucket()
        server.client().put_object(Bucket=bucket, Key="b/obj.bin", Body=b"x" * 1000)
        options = json.dumps(server.storage_options())
        if args.stages:
            _stages(args.rounds, f"s3://{bucket}/b", options)
            return
        results: dict[str, list[dict[str, float]]] = {"helper": [], "here": []}
        for _ in range(args.rounds):
            for mode, rows in results.items():
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, f"s3://{bucket}/b", options],
                    env={**os.environ, "LITDATA_OBSTORE_PROCESS": mode},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rows.append(json.loads(out.stdout))
        for mode, rows in results.items():
            first = statistics.median(r["first_ms"] for r in rows)
            second = statistics.median(r["second_ms"] for r in rows)
            cpu = statistics.median(r["first_cpu_ms"] for r in rows)
            print(
                f"{mode:6s} first request median {first:7.1f} ms (CPU {cpu:6.1f} ms, the helper's included), "
                f"second {second:6.2f} ms ({len(rows)} processes)"
            )


if __name__ == "__main__":
    main()
