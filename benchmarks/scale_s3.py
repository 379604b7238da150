"""Scale from a bucket: open a dataset of many chunks from the local S3 server, index not cached and cached.

Usage (from the repository root, after ``benchmarks/scale.py`` wrote the datasets)::

    uv run python benchmarks/scale_s3.py                                  # 100k and 1M chunks, ours
    uv run python benchmarks/scale_s3.py --sizes 100000 --libs ours,upstream --upstream-python PY

Opening reads only ``index.json``, so only that file of ``benchmarks/out/scale/data-{n}`` is put
in a bucket of a ``moto_server`` on 127.0.0.1 (started and stopped here, as the tests do). Each
measurement is a fresh process of the library's venv with an empty cache folder of its own, which
opens ``StreamingDataset("s3://bench/data-{n}", shuffle=True)`` and takes ``len()`` twice: the
first open downloads the index into the cache, the second finds it cached. Printed: wall and CPU
seconds of each open and the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.scale import OUT, SAMPLES_PER_CHUNK, lib_python

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
from litdata import StreamingDataset
url, options, expected = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
out = {}
for name in ("download", "cached"):
    started, cpu = time.perf_counter(), time.process_time()
    dataset = StreamingDataset(url, shuffle=True, storage_options=options)
    count = len(dataset)
    out[name + "_s"] = time.perf_counter() - started
    out[name + "_cpu_s"] = time.process_time() - cpu
    if count != expected:
        raise SystemExit(f"len() is {count}, expected {expected}")
    del dataset
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("S3OPEN " + json.dumps(out), flush=True)
"""


def _open(python: str, url: str, options: dict[str, str], expected: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="scale-s3-cache-") as cache:
        env = {"LITDATA_CACHE_DIR": cache, "PATH": "/usr/bin:/bin", "HOME": cache}
        done = subprocess.run(
            [python, "-c", CHILD, url, json.dumps(options), str(expected)],
            capture_output=True, text=True, env=env, timeout=900, check=False,
        )  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith("S3OPEN "):
            return json.loads(line[len("S3OPEN ") :])
    raise SystemExit(f"the open failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="chunk counts (datasets scale.py wrote)")
    parser.add_argument("--libs", default="ours")
    parser.add_argument("--upstream-python", default=None)
    args = parser.parse_args()
    from tests.support.servers import start_moto

    with start_moto() as server:
        client = server.client()
        client.create_bucket(Bucket="bench")
        for size in map(int, args.sizes.split(",")):
            index = OUT / f"data-{size}" / "index.json"
            if not index.is_file():
                raise SystemExit(f"{index} is missing: run benchmarks/scale.py --sizes {size} --epoch-max 0 first")
            client.upload_file(str(index), "bench", f"data-{size}/index.json")
            for lib in args.libs.split(","):
                found = _open(lib_python(lib, args.upstream_python), f"s3://bench/data-{size}",
                              server.storage_options(), size * SAMPLES_PER_CHUNK)  # fmt: skip
                print(f"[scale-s3] {lib} {size} chunks: {json.dumps({k: round(v, 3) for k, v in found.items()})}")


if __name__ == "__main__":
    main()
