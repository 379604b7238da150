"""The state dict's dataset fingerprint, built from the index's columns, is the digest it always was.

State dicts saved before record ``sha1("{filename}:{chunk_size}:{chunk_bytes};" per chunk)[:16]``;
the columnar build must give the same digest for every index, or they would no longer load.
"""

from __future__ import annotations

import hashlib
import random

import pytest

from litdata_format import ChunkInfo, DatasetIndex
from litdata_stream._dataset import _fingerprint


def _as_written(index: DatasetIndex) -> str:
    text = "".join(f"{c.filename}:{c.chunk_size}:{c.chunk_bytes};" for c in index.chunks)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("seed", range(6))
def test_the_fingerprint_is_the_digest_of_the_entries(seed: int) -> None:
    rng = random.Random(seed)
    values = [0, 1, 9, 10, 99, 100, 12345, 10**12, 2**48]
    names = ["chunk-0-0.bin", "a/b/c.bin", "x", "日本/チャンク.bin", "é" * 40, "long-" * 30 + ".bin"]
    count = rng.choice([1, 2, 7, 9000, 20_000])  # across the blocks the digest is built in
    ascii_only = seed % 2 == 0
    chunks = [
        ChunkInfo(
            rng.choice(names[:3] if ascii_only else names) + f"-{i}",
            rng.choice(values) if rng.random() < 0.5 else rng.randint(0, 2**40),
            rng.choice(values[:7]),
        )
        for i in range(count)
    ]
    index = DatasetIndex(chunks, {"data_format": [], "data_spec": None})
    assert _fingerprint(index) == _as_written(index)
