"""First-request latency of a root process: obstore through the helper vs obstore in-process.

Starts moto on 127.0.0.1, seeds one object, then runs fresh root processes that time their first
``get`` (and a second one) with ``LITDATA_OBSTORE_PROCESS=helper`` and ``=here``, interleaved.

    uv run python benchmarks/helper_startup.py --rounds 15
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.servers import start_moto

_CHILD = """
import json, sys, time
from litdata_io import get_storage
storage = get_storage(sys.argv[1], json.loads(sys.argv[2]))
t0 = time.perf_counter(); storage.get("obj.bin")
t1 = time.perf_counter(); storage.get("obj.bin"); t2 = time.perf_counter()
print(json.dumps({"first_ms": (t1 - t0) * 1e3, "second_ms": (t2 - t1) * 1e3}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with start_moto() as server:
        bucket = server.create_bucket()
        server.client().put_object(Bucket=bucket, Key="b/obj.bin", Body=b"x" * 1000)
        options = json.dumps(server.storage_options())
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
            print(f"{mode:6s} first request median {first:7.1f} ms, second {second:6.2f} ms ({len(rows)} processes)")


if __name__ == "__main__":
    main()
