"""Batch fetch for map-style use: many samples by global index, each chunk opened once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from litdata_format.internal import Chunk
from litdata_stream._source import ChunkSource

__all__ = ["fetch_many"]


def fetch_many(indices: Sequence[int], starts: Sequence[int], source: ChunkSource,
               read: Callable[[Chunk, int, int, int], Any]) -> list[Any]:  # fmt: skip
    """``[dataset[i] for i in indices]``, reading the samples chunk by chunk.

    Args:
        indices: global sample indexes (negative ones count from the end).
        starts: the global index of each chunk's first sample, then the number of samples.
        source: where the chunks are opened.
        read: ``read(opened chunk, chunk number, position in the chunk, global index)``: the sample.
    """
    wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
    total = int(starts[-1])
    if wanted.size == 0:
        return []
    wanted = np.where(wanted < 0, wanted + total, wanted)
    bad = (wanted < 0) | (wanted >= total)
    if bad.any():
        first = int(np.asarray(indices).reshape(-1)[int(np.argmax(bad))])
        raise IndexError(f"sample {first} is out of range: the dataset has {total} samples")
    first_samples = np.asarray(starts, dtype=np.int64)
    chunks = np.searchsorted(first_samples, wanted, side="right") - 1
    by_chunk = np.argsort(chunks, kind="stable")
    out: list[Any] = [None] * len(wanted)
    for slot, chunk, index in zip(by_chunk.tolist(), chunks[by_chunk].tolist(), wanted[by_chunk].tolist()):
        out[slot] = read(source.chunk(chunk), chunk, index - int(first_samples[chunk]), index)
    return out
