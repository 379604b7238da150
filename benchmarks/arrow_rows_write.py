"""Writing cost of one BinaryWriter: optimize-records' samples, or dicts of JSON-like values (Arrow rows).

Usage (run the checkouts to compare alternately, in one session; see docs/benchmarks.md)::

    uv run python -m benchmarks.arrow_rows_write records          # {"index": int, "tokens": int32[128]}
    uv run python -m benchmarks.arrow_rows_write json             # {"index", "text", "tags", "score"}: Arrow rows
    uv run python -m benchmarks.arrow_rows_write json --pytree    # the same as PyTree items (arrow_rows=False)
    uv run python -m benchmarks.arrow_rows_write bytes            # {"image": ~20 KB of bytes, "label": int}
    uv run python -m benchmarks.arrow_rows_write bytes --pytree

``records`` and ``json`` print samples per second for 100k samples into 8 MiB chunks. ``bytes``
(issue 32) writes 2,500 samples of 20 KB on average (one optimize worker's half of 5,000 JPEG
files, ~50 MB) into one 64 MiB chunk, as a worker of a job under 64 MiB per worker does, and
prints the seconds of the ``add_item`` calls, of ``done()`` (the chunk written after the last
sample: the tail) and of both.
"""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Any

import numpy as np

from litdata_format import BinaryWriter

N = 100_000
BYTES_SAMPLES = 2_500


def _bytes_samples() -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    block = rng.bytes(40_000)
    sizes = rng.integers(10_000, 30_000, BYTES_SAMPLES)
    # Fresh bytes objects, as fn reading a file makes them (slices of one block would share nothing anyway).
    return [{"image": block[i % 1000 : i % 1000 + int(size)], "label": i % 1000} for i, size in enumerate(sizes)]


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "records"
    tokens = np.arange(128, dtype=np.int32)

    def make(i: int) -> dict[str, Any]:
        if kind == "records":
            return {"index": i, "tokens": tokens + i}
        return {"index": i, "text": f"sample {i} " * 4, "tags": ["a", "b"], "score": i * 0.5}

    samples = _bytes_samples() if kind == "bytes" else [make(i) for i in range(N)]
    options: dict[str, Any] = {"arrow_rows": False} if "--pytree" in sys.argv else {}
    chunk_bytes = 64 << 20 if kind == "bytes" else 8 << 20
    # The writer imports pyarrow in a thread at the first sample, overlapped with fn's work in a
    # job; here the samples are ready-made, so the import is taken out of the timing.
    __import__("pyarrow.ipc")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        writer = BinaryWriter(tmp, chunk_bytes=chunk_bytes, **options)
        for i, sample in enumerate(samples):
            writer.add_item(i, sample)
        added = time.perf_counter()
        writer.done()
        end = time.perf_counter()
        if kind == "bytes":
            size = sum(c.chunk_bytes for c in writer.chunks)
            seconds = f"add {added - start:.3f} s, done {end - added:.3f} s, total {end - start:.3f} s"
            print(f"{seconds}, {size / 1e6:.0f} MB")
        else:
            print(f"{len(samples) / (end - start):.0f}")


if __name__ == "__main__":
    main()
