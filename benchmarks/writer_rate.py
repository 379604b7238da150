"""Not a suite row: one ``BinaryWriter`` alone, the samples already in memory, against the page cache (issue 32).

What ``optimize`` can at best reach per worker: no ``fn``, no workers, no start-up. The samples
are those of ``benchmarks/optimize_phases.py`` (its inputs, generated there if missing):

* ``bytes``: 2,500 JPEG files' bytes as ``{"image": bytes, "label": int}`` (64 MiB chunks);
* ``tokens``: 12 shards cut into samples of 2,000 int32 tokens, ``TokensLoader`` (64 MiB chunks).

Each round writes the samples, then writes the same number of bytes into a new file with one
``write`` per 64 MiB (the page cache's sequential rate, in the same process, right after). The
ratio is given by the clock and by CPU time (the page cache's write CPU over the writer's: the
kernel's work is CPU time of the process), the latter steadier on a loaded machine.

    uv run python -m benchmarks.writer_rate                 # both, 5 rounds
    uv run python -m benchmarks.writer_rate tokens --rounds 9
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.optimize_phases import _inputs
from litdata_format import BinaryWriter, TokensLoader

ROOT = Path(__file__).resolve().parents[1]

BLOCK = 64 << 20


def samples_of(workload: str) -> tuple[list[Any], dict[str, Any]]:
    """The samples of ``workload``, in memory, and the writer's options."""
    images, tokens = _inputs()
    if workload == "bytes":
        files = sorted(images.glob("*.jpg"))[:2500]
        return [{"image": p.read_bytes(), "label": i % 1000} for i, p in enumerate(files)], {"chunk_bytes": BLOCK}
    stream = np.concatenate([np.load(p) for p in sorted(tokens.glob("*.npy"))[:12]])
    chunk = BLOCK // 4 // 2049 * 2049
    samples = [stream[s : s + 2000] for s in range(0, len(stream), 2000)]
    return samples, {"chunk_size": chunk, "item_loader": TokensLoader()}


def one_round(samples: list[Any], options: dict[str, Any], out: Path) -> tuple[float, float, float, float]:
    """(writer bytes/s, writer CPU s, page cache bytes/s, page cache CPU s) of one round."""
    shutil.rmtree(out, ignore_errors=True)
    started, cpu = time.perf_counter(), time.process_time()
    writer = BinaryWriter(out, **options)
    for index, sample in enumerate(samples):
        writer.add_item(index, sample)
    writer.done()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    size = sum(p.stat().st_size for p in out.glob("chunk-*"))
    block = os.urandom(min(size, BLOCK))
    started, cache_cpu = time.perf_counter(), time.process_time()
    with open(out / "bandwidth.bin", "wb", buffering=0) as handle:
        left = size
        while left > 0:
            left -= handle.write(memoryview(block)[: min(left, len(block))])
    page_cache, cache_cpu = size / (time.perf_counter() - started), time.process_time() - cache_cpu
    os.unlink(out / "bandwidth.bin")
    return size / elapsed, cpu, page_cache, cache_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description="One BinaryWriter alone against the page cache (issue 32).")
    parser.add_argument("workloads", nargs="*", help="bytes, tokens (default: both)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    workloads: list[str] = args.workloads or ["bytes", "tokens"]
    if unknown := set(workloads) - {"bytes", "tokens"}:
        parser.error(f"unknown workloads {sorted(unknown)}: use bytes, tokens")
    with tempfile.TemporaryDirectory(prefix="writer-rate-") as scratch:
        for workload in workloads:
            samples, options = samples_of(workload)
            rounds = [one_round(samples, options, Path(scratch) / workload) for _ in range(args.rounds)]
            rate, cpu, cache, cache_cpu = (statistics.median(r[i] for r in rounds) for i in range(4))
            # The CPU ratio holds under load, when the wall-clock one swings with what else runs.
            print(
                f"{workload}: {len(samples):,} samples, writer {rate / 1e6:,.0f} MB/s (CPU {cpu:.3f} s), "
                f"page cache {cache / 1e6:,.0f} MB/s (CPU {cache_cpu:.3f} s): {rate / cache:.0%} "
                f"(CPU: {cache_cpu / cpu:.0%})"
            )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
