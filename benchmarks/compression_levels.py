"""optimize-records throughput by compression level: ours and upstream LitData 0.2.76, side by side.

Not a row of the suite: one measure of ``compression_level``. Each library runs, in its own
process (ours from this checkout, upstream from the side venv of ``tests/support/upstream_venv.py``),
``optimize`` over workload 1's records (``{"index": int, "tokens": int32[128]}``, 8 MB chunks,
2 fork workers) with: no compression, ``compression="zstd"`` alone (each library's default
level: ``"chunk"`` here, ``"batch"`` upstream), and ``"zstd"`` with ``compression_level``
``"chunk"``, ``"batch"`` and ``"sample"``. Every configuration runs ``--rounds`` times in
interleaved order (the machine is shared: only numbers taken side by side compare); the report
is the median samples per second and the dataset's size. Each dataset is read back and its
sample count checked.

    uv run python -m benchmarks.compression_levels --records 200000 --rounds 3
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

CONFIGS: dict[str, dict[str, str]] = {
    "none": {},
    "zstd (default level)": {"compression": "zstd"},
    "zstd chunk": {"compression": "zstd", "compression_level": "chunk"},
    "zstd batch": {"compression": "zstd", "compression_level": "batch"},
    "zstd sample": {"compression": "zstd", "compression_level": "sample"},
}

# Run by each library's python: optimize, time it, read the dataset back, print one JSON line.
JOB = """
import json, os, sys, time
import numpy as np
from litdata import StreamingDataset, optimize

def record(index):
    return {"index": index, "tokens": (np.arange(128, dtype=np.int32) + index) % 50257}

if __name__ == "__main__":
    out, n, options = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    start = time.perf_counter()
    optimize(fn=record, inputs=list(range(n)), output_dir=out, chunk_bytes=8 << 20, num_workers=2,
             start_method="fork", verbose=False, **options)
    seconds = time.perf_counter() - start
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".bin"))
    count = len(StreamingDataset(out))
    print(json.dumps({"seconds": seconds, "bytes": size, "count": count}))
"""


def _run(python: str, out: Path, records: int, options: dict[str, str]) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["LITDATA_CACHE_DIR"] = str(out.parent / "cache")
    env["LITDATA_DISABLE_VERSION_CHECK"] = "1"
    proc = subprocess.run(
        [python, "-c", JOB, str(out), str(records), json.dumps(options)],
        capture_output=True,
        text=True,
        env=env,
        cwd=out.parent,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{python} failed on {options}:\n{proc.stdout}\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["count"] != records:
        raise RuntimeError(f"{python} wrote {result['count']} samples for {options}, expected {records}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from tests.support.upstream_venv import upstream_python

    pythons = {"ours": sys.executable, "upstream 0.2.76": str(upstream_python())}
    rates: dict[tuple[str, str], list[float]] = {}
    sizes: dict[tuple[str, str], int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-levels-") as tmp:
        for round_no in range(args.rounds):
            for number, (name, options) in enumerate(CONFIGS.items()):
                for lib, python in pythons.items():
                    folder = Path(tmp) / f"{lib.split()[0]}-{round_no}-{number}"
                    folder.mkdir()
                    result = _run(python, folder / "out", args.records, options)
                    rates.setdefault((lib, name), []).append(args.records / result["seconds"])
                    sizes[(lib, name)] = int(result["bytes"])
                    print(f"round {round_no} {lib:16} {name:22} {args.records / result['seconds']:>10,.0f} samples/s")
    print(f"\n{args.records} records, 2 fork workers, median of {args.rounds} rounds\n")
    print(f"| compression | {' | '.join(f'{lib} samples/s | {lib} MB' for lib in pythons)} |")
    print(f"|---|{'---|---|' * len(pythons)}")
    for name in CONFIGS:
        cells = [f"{statistics.median(rates[(lib, name)]):,.0f} | {sizes[(lib, name)] / 1e6:.1f}" for lib in pythons]
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
