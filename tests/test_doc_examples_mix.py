"""The mixing examples of upstream's docs: CombinedStreamingDataset (weights, batching methods) and
ParallelStreamingDataset (pairs, transforms with and without generators, cycling), on local folders.

Adapted only in: the ``s3://tinyllama-template/...`` and ``input_dir_*`` folders are local ones
written here, and the cycling example's ``print(len(cycled_dataset)))`` loses its stray ``)``
(a syntax error in the docs).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any, Dict, Tuple  # noqa: UP035 (as the docs write them)

import numpy as np
import pytest
import torch
from tqdm import tqdm

from litdata import (
    CombinedStreamingDataset,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
    TokensLoader,
)
from litdata_format import BinaryWriter

# The docs pass pin_memory=True; on a machine without an accelerator torch says it is ignored.
NO_ACCELERATOR = "ignore:.*pin_memory.*:UserWarning"


def _tokens(folder: Path, first: int, blocks: int) -> str:
    """``blocks`` blocks of 2049 tokens, every token of this dataset in ``[first, first + 1000)``."""
    writer = BinaryWriter(folder, chunk_size=2049 * 4, item_loader=TokensLoader())
    for i in range(blocks):
        writer.add_item(i, np.full(2049, first + i, dtype=np.int32))
    writer.done()
    writer.merge()
    return str(folder)


def _numbers(folder: Path, values: range) -> str:
    writer = BinaryWriter(folder, chunk_size=8)
    for i, value in enumerate(values):
        writer.add_item(i, value)
    writer.done()
    writer.merge()
    return str(folder)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("mix")
    return {
        "slimpajama": _tokens(root / "slimpajama" / "train", 0, 40),
        "starcoder": _tokens(root / "starcoder", 1000, 20),
        "input_dir_1": _numbers(root / "input_dir_1", range(0, 30)),
        "input_dir_2": _numbers(root / "input_dir_2", range(100, 130)),
    }


@pytest.mark.filterwarnings(NO_ACCELERATOR)
def test_combined_token_datasets_with_weights(dirs: dict[str, str]) -> None:
    train_datasets = [
        StreamingDataset(
            input_dir=dirs["slimpajama"],
            item_loader=TokensLoader(block_size=2048 + 1),  # Optimized loader for tokens used by LLMs
            shuffle=True,
            drop_last=True,
        ),
        StreamingDataset(
            input_dir=dirs["starcoder"],
            item_loader=TokensLoader(block_size=2048 + 1),  # Optimized loader for tokens used by LLMs
            shuffle=True,
            drop_last=True,
        ),
    ]

    # Mix SlimPajama data and Starcoder data with these proportions:
    weights = (0.693584, 0.306416)
    combined_dataset = CombinedStreamingDataset(
        datasets=train_datasets,
        seed=42,
        weights=weights,
        iterate_over_all=False,  # required when passing weights (see below)
    )

    train_dataloader = StreamingDataLoader(
        combined_dataset,
        batch_size=8,
        pin_memory=True,
        num_workers=os.cpu_count(),  # pyright: ignore[reportArgumentType] (None only where the count is unknown)
    )

    # Iterate over the combined datasets
    blocks = []
    for batch in tqdm(train_dataloader):
        assert tuple(batch.shape) == (8, 2049)
        blocks.extend(int(row[0]) for row in batch)
        assert all((row == row[0]).all() for row in batch)  # a block is one sample: never two mixed
    from_starcoder = sum(b >= 1000 for b in blocks)
    assert 0 < from_starcoder < len(blocks) and len(set(blocks)) == len(blocks)


def test_batching_methods(dirs: dict[str, str]) -> None:
    dataset1 = StreamingDataset(dirs["input_dir_1"])
    dataset2 = StreamingDataset(dirs["input_dir_2"])

    combined_dataset = CombinedStreamingDataset(
        datasets=[dataset1, dataset2],
        batching_method="stratified",  # default
    )
    stratified = [b.tolist() for b in StreamingDataLoader(combined_dataset, batch_size=6)]
    assert any(min(b) < 100 <= max(b) for b in stratified)  # batches mix the datasets

    combined_dataset = CombinedStreamingDataset(
        datasets=[dataset1, dataset2],
        batching_method="per_stream",
    )
    per_stream = [b.tolist() for b in StreamingDataLoader(combined_dataset, batch_size=6)]
    assert per_stream and all(max(b) < 100 or min(b) >= 100 for b in per_stream)  # one dataset per batch


def test_parallel_pairs(dirs: dict[str, str]) -> None:
    parallel_dataset = ParallelStreamingDataset(
        [
            StreamingDataset(input_dir=dirs["input_dir_1"]),
            StreamingDataset(input_dir=dirs["input_dir_2"]),
        ],
    )

    dataloader = StreamingDataLoader(parallel_dataset)

    pairs = []
    for batch_1, batch_2 in tqdm(dataloader):
        pairs.append((int(batch_1), int(batch_2)))
    assert pairs == [(i, 100 + i) for i in range(30)]


def test_parallel_transform(dirs: dict[str, str]) -> None:
    dset_1, dset_2 = StreamingDataset(dirs["input_dir_1"]), StreamingDataset(dirs["input_dir_2"])

    def transform(samples: Tuple[Any]):  # noqa: UP006
        sample_1, sample_2 = samples  # as many samples as wrapped datasets  # pyright: ignore[reportAssignmentType] (the docs' hint)
        return sample_1 + sample_2  # example transformation

    parallel_dataset = ParallelStreamingDataset([dset_1, dset_2], transform=transform)

    dataloader = StreamingDataLoader(parallel_dataset)

    sums = []
    for transformed_batch in tqdm(dataloader):
        sums.append(int(transformed_batch))
    assert sums == [100 + 2 * i for i in range(30)]


def test_parallel_transform_with_generators(dirs: dict[str, str]) -> None:
    dset_1, dset_2 = StreamingDataset(dirs["input_dir_1"]), StreamingDataset(dirs["input_dir_2"])

    def transform(samples: Tuple[Any], rngs: Dict[str, Any]):  # noqa: UP006
        sample_1, sample_2 = samples  # as many samples as wrapped datasets  # pyright: ignore[reportAssignmentType] (the docs' hint)
        rng = rngs["random"]  # "random", "numpy" and "torch" keys available
        return rng.random() * sample_1 + rng.random() * sample_2  # example transformation

    parallel_dataset = ParallelStreamingDataset([dset_1, dset_2], transform=transform)

    def epoch(dataset: ParallelStreamingDataset) -> list[float]:
        return [float(x) for batch in StreamingDataLoader(dataset, batch_size=4) for x in batch]

    first = epoch(parallel_dataset)
    again = epoch(ParallelStreamingDataset([dset_1, dset_2], transform=transform))
    assert len(first) == 30 and first == again  # seeded from the dataset state: reproducible
    assert epoch(parallel_dataset) != first  # the next epoch draws anew
    assert len(set(first)) == 30 and all(0 <= x < 2 * 129 for x in first)
    assert {"random", "numpy", "torch"} <= set(_rngs_seen(dset_1, dset_2))


def _rngs_seen(dset_1: StreamingDataset, dset_2: StreamingDataset) -> list[str]:
    keys: list[str] = []

    def transform(samples: Tuple[Any], rngs: Dict[str, Any]):  # noqa: UP006
        keys.extend(rngs)
        return torch.tensor(0)

    next(iter(ParallelStreamingDataset([dset_1, dset_2], transform=transform)))
    return keys


def test_parallel_cycles_one_dataset(dirs: dict[str, str]) -> None:
    dataset = StreamingDataset(input_dir=dirs["input_dir_1"])

    cycled_dataset = ParallelStreamingDataset([dataset], length=100)

    print(len(cycled_dataset))  # 100
    assert len(cycled_dataset) == 100

    dataloader = StreamingDataLoader(cycled_dataset)

    seen = []
    for (batch,) in tqdm(dataloader):
        seen.append(int(batch))
    assert len(seen) == 100 and seen[:30] == list(range(30)) and seen[30:60] == list(range(30))

    infinite = ParallelStreamingDataset([dataset], length=float("inf"))
    stream = iter(StreamingDataLoader(infinite))
    values = [int(next(stream)[0]) for _ in range(70)]
    assert all((b - a) % 30 == 1 for a, b in itertools.pairwise(values))  # round and round, in order
