"""Batch fetch for map-style use: many samples by global index, each chunk opened once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from litdata_stream._dataset import StreamingDataset

__all__ = ["fetch_many"]


def fetch_many(dataset: StreamingDataset, indices: Sequence[int]) -> list[Any]:
    """``[dataset[i] for i in indices]``, reading the samples chunk by chunk.

    Args:
        dataset: the dataset to read from.
        indices: global sample indexes (negative ones count from the end).
    """
    wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
    total = dataset.num_samples
    if wanted.size == 0:
        return []
    wanted = np.where(wanted < 0, wanted + total, wanted)
    bad = (wanted < 0) | (wanted >= total)
    if bad.any():
        first = int(np.asarray(indices).reshape(-1)[int(np.argmax(bad))])
        raise IndexError(f"sample {first} is out of range: the dataset has {total} samples")
    starts = np.asarray(dataset._starts, dtype=np.int64)
    chunks = np.searchsorted(starts, wanted, side="right") - 1
    by_chunk = np.argsort(chunks, kind="stable")
    source = dataset._source()
    load = dataset.item_loader.load
    out: list[Any] = [None] * len(wanted)
    for slot, chunk, index in zip(by_chunk.tolist(), chunks[by_chunk].tolist(), wanted[by_chunk].tolist()):
        item = dataset._item_position(chunk, index - int(starts[chunk]))
        opened = source.chunk(chunk)
        out[slot] = dataset._transformed(load(opened, item), index, opened, item)
    return out
