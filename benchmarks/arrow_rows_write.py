"""Writing cost of one BinaryWriter: optimize-records' samples, or dicts of JSON-like values (Arrow rows).

Usage (run the checkouts to compare alternately, in one session; see docs/benchmarks.md)::

    uv run python benchmarks/arrow_rows_write.py records          # {"index": int, "tokens": int32[128]}
    uv run python benchmarks/arrow_rows_write.py json             # {"index", "text", "tags", "score"}: Arrow rows
    uv run python benchmarks/arrow_rows_write.py json --pytree    # the same as PyTree items (arrow_rows=False)

Prints samples per second for 100k samples into 8 MiB chunks.
"""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Any

import numpy as np

from litdata_format import BinaryWriter

N = 100_000


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "records"
    tokens = np.arange(128, dtype=np.int32)

    def make(i: int) -> dict[str, Any]:
        if kind == "records":
            return {"index": i, "tokens": tokens + i}
        return {"index": i, "text": f"sample {i} " * 4, "tags": ["a", "b"], "score": i * 0.5}

    samples = [make(i) for i in range(N)]
    options: dict[str, Any] = {"arrow_rows": False} if "--pytree" in sys.argv else {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        writer = BinaryWriter(tmp, chunk_bytes=8 << 20, **options)
        for i, sample in enumerate(samples):
            writer.add_item(i, sample)
        writer.done()
        print(f"{N / (time.perf_counter() - start):.0f}")


if __name__ == "__main__":
    main()
