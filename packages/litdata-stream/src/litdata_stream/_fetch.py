"""Batch fetch for map-style use: many samples by global index, each chunk opened once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from litdata_format.internal import Chunk, SampleMap
from litdata_stream._source import ChunkSource

__all__ = ["fetch_many"]


def fetch_many(indices: Sequence[int], samples: SampleMap, source: ChunkSource,
               read: Callable[[Chunk, int, int, int], Any]) -> list[Any]:  # fmt: skip
    """``[dataset[i] for i in indices]``, reading the samples chunk by chunk.

    Args:
        indices: global sample indexes (negative ones count from the end).
        samples: the dataset's sample map.
        source: where the chunks are opened.
        read: ``read(opened chunk, chunk number, position in the chunk, global index)``: the sample.
    """
    wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
    total = len(samples)
    if wanted.size == 0:
        return []
    wanted = np.where(wanted < 0, wanted + total, wanted)
    bad = (wanted < 0) | (wanted >= total)
    if bad.any():
        first = int(np.asarray(indices).reshape(-1)[int(np.argmax(bad))])
        raise IndexError(f"sample {first} is out of range: the dataset has {total} samples")
    chunks, positions = samples.locate_many(wanted)
    by_chunk = np.argsort(chunks, kind="stable")
    out: list[Any] = [None] * len(wanted)
    rows = zip(by_chunk.tolist(), chunks[by_chunk].tolist(), positions[by_chunk].tolist(), wanted[by_chunk].tolist())
    for slot, chunk, position, index in rows:
        out[slot] = read(source.chunk(chunk), chunk, position, index)
    return out
