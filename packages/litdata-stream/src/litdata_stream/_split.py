"""``train_test_split``: cut one StreamingDataset into disjoint datasets (train / val / test)."""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence

import numpy as np

from litdata_stream._dataset import StreamingDataset, reader_of
from litdata_stream._draws import python_random_state

__all__ = ["train_test_split"]


def train_test_split(
    streaming_dataset: StreamingDataset, splits: Sequence[float], seed: int = 42, shuffle: bool = True
) -> list[StreamingDataset]:
    """Split ``streaming_dataset`` into disjoint datasets holding the given fractions of its samples.

    Upstream LitData's choice, so the same seed puts the same samples in each split: the chunks
    holding samples are put in the order of ``RandomState([seed]).permutation`` (index order when
    ``shuffle=False``), their samples laid end to end, and the splits cut as consecutive runs of
    ``int(len * fraction)`` samples. Each split is a :meth:`StreamingDataset.subset` (its samples
    numbered in index order).

    Args:
        streaming_dataset: the dataset to split (it may itself be a subsample or a subset).
        splits: one fraction in [0, 1] per split, summing to at most 1 (the rest is left out).
        seed: the seed of the chunk order.
        shuffle: draw the chunk order from ``seed``; otherwise split in index order.

    Returns:
        One dataset per fraction, in the order given.

    Raises:
        ValueError: a fraction is not a number in [0, 1], or the fractions sum to more than 1.
        TypeError: ``streaming_dataset`` is not a StreamingDataset.
    """
    if not isinstance(streaming_dataset, StreamingDataset):
        raise TypeError(f"train_test_split needs a StreamingDataset, got {type(streaming_dataset).__name__}")
    fractions = list(splits)
    if not fractions:
        raise ValueError("splits is empty; give one fraction per split, e.g. splits=[0.8, 0.1, 0.1]")
    for value in fractions:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= float(value) <= 1:
            raise ValueError(
                f"Each Split should be a float with each value in [0,1]: each split must be a fraction in [0, 1], "
                f"got {value!r}"
            )
    if math.fsum(fractions) > 1 + 1e-9:
        raise ValueError(f"Splits' sum must be less than 1: the splits sum to {math.fsum(fractions):g}")

    lengths = np.asarray(reader_of(streaming_dataset).samples_per_chunk, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    held = np.flatnonzero(lengths)  # upstream draws among the chunks the dataset reads samples of
    if shuffle:
        held = held[python_random_state(seed).permutation(len(held))]
    # Global sample indexes, chunk by chunk in the drawn order.
    ordered = np.concatenate([np.arange(starts[c], starts[c] + lengths[c]) for c in held.tolist()] or [[]])
    total = len(ordered)
    counts = [int(total * float(value)) for value in fractions]  # upstream's rounding: int(100 * 0.29) is 28
    if any(count == 0 for count in counts):
        warnings.warn(
            f"train_test_split: a split of {total} samples by {fractions} leaves an empty split",
            UserWarning,
            stacklevel=2,
        )
    out, offset = [], 0
    for count in counts:
        out.append(streaming_dataset.subset(ordered[offset : offset + count].astype(np.int64).tolist()))
        offset += count
    return out
