"""The chunk list's fingerprint (state dicts record it), built from the table's columns, is the digest it always was.

State dicts saved before record ``sha1("{filename}:{chunk_size}:{chunk_bytes};" per chunk)[:16]``;
the columnar build must give the same digest for every index, or they would no longer load.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from litdata_format import ChunkInfo, DatasetIndex
from litdata_format._index._dataset_index import ChunkTable


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
    assert index.table.fingerprint() == _as_written(index)


def test_the_fingerprint_of_a_known_chunk_list_never_changes() -> None:
    # Digests that state dicts written by earlier releases hold (computed by litdata-stream's
    # _fingerprint before it moved here): a change breaks their resume.
    chunks = [ChunkInfo(f"chunk-{r}-{n}.bin", 1000 * n + r, n + 1) for r in range(3) for n in range(5)]
    assert DatasetIndex(chunks, {"data_format": [], "data_spec": None}).table.fingerprint() == "1ceaaf552df4075a"
    chunks = [ChunkInfo("日本/チャンク.bin", 7, 3), ChunkInfo("x.bin", 0, 0)]
    assert DatasetIndex(chunks, {"data_format": [], "data_spec": None}).table.fingerprint() == "dc36d59e952d6274"
    empty = ChunkTable([], np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    assert empty.fingerprint() == "da39a3ee5e6b4b0d"


def test_a_table_built_by_hand_with_negative_counts_still_gets_the_digest_of_its_entries() -> None:
    # Parsing an index refuses a negative chunk_size or chunk_bytes; a table built in code may hold one.
    chunks = [ChunkInfo("a.bin", -5, 3), ChunkInfo("b.bin", 12, -1), ChunkInfo("c.bin", 0, 0)]
    index = DatasetIndex(chunks, {"data_format": [], "data_spec": None})
    assert index.table.fingerprint() == _as_written(index)
