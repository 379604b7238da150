"""The low-level Cache: write samples (from the main process or DataLoader workers), read them back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from litdata_format import Serializer, TokensLoader
from litdata_io import Dir
from litdata_stream import Cache, StreamingDataset


def test_cache_with_simple_format(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path / "cache1"), chunk_bytes=90)
    for i in range(100):
        cache[i] = i
    cache.done()
    cache.merge()
    assert cache.filled and len(cache) == 100
    for i in range(100):
        assert i == cache[i]

    cache = Cache(str(tmp_path / "cache2"), chunk_bytes=90)
    for i in range(100):
        cache[i] = [i, {0: [i + 1]}]
    cache.done()
    cache.merge()
    for i in range(100):
        assert [i, {0: [i + 1]}] == cache[i]
    assert len(json.loads((tmp_path / "cache2" / "index.json").read_text())["chunks"]) > 1


class _Images(Dataset):
    """The upstream pattern: a map-style dataset that fills the cache on its first pass."""

    def __init__(self, cache: Cache, size: int) -> None:
        self.cache = cache
        self.data = [{"image": np.full((4, 4), i, dtype=np.uint8), "class": i % 10} for i in range(size)]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> Any:
        if self.cache.filled:
            return self.cache[index]
        self.cache[index] = {**self.data[index], "index": index}
        return index


@pytest.mark.parametrize("workers", [0, 2])
def test_write_from_dataloader_workers_and_read_back(tmp_path: Path, workers: int) -> None:
    cache = Cache(Dir(path=str(tmp_path / "cache")), chunk_size=10)
    dataset = _Images(cache, 85)
    for _ in DataLoader(dataset, batch_size=4, num_workers=workers):
        pass
    if workers == 0:
        cache.done()  # in the main process the caller says when writing is over
    cache.merge(num_workers=max(1, workers))  # workers wrote their index as they exited
    assert cache.filled and len(cache) == 85
    samples = [dataset[i] for i in range(len(dataset))]
    assert sorted(s["index"] for s in samples) == list(range(85))
    for sample in samples:
        original = dataset.data[sample["index"]]
        assert sample["class"] == original["class"]
        assert np.array_equal(np.asarray(sample["image"]), original["image"])
    if workers == 0:
        assert [s["index"] for s in samples] == list(range(85))
    streamed = StreamingDataset(str(tmp_path / "cache"))
    assert sorted(s["index"] for s in streamed) == list(range(85))


def test_cache_for_text_tokens(tmp_path: Path) -> None:
    block_size = 64 + 1
    cache = Cache(input_dir=str(tmp_path), chunk_size=block_size * 11, item_loader=TokensLoader(block_size))
    rng = np.random.default_rng(42)
    pieces = []
    counter = 0
    while True:
        text_ids = torch.from_numpy(rng.integers(0, 1000, int(rng.integers(1, 200))).astype(np.int32))
        pieces.append(text_ids)
        if cache._add_item(counter, text_ids):
            break
        counter += 1
    cache.done()
    cache.merge()
    assert len(cache) == 10  # the first chunk holds fewer than 11 whole blocks; the last item is a tiny chunk
    tokens = torch.cat(pieces)
    assert torch.equal(cache[0], tokens[:block_size]) and torch.equal(cache[1], tokens[block_size : 2 * block_size])
    with pytest.raises(ValueError, match="TokensLoader"):
        len(Cache(str(tmp_path), chunk_size=block_size * 11))


class _Custom:
    pass


class _CustomSerializer(Serializer):
    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return np.array([1]).tobytes(), None

    def deserialize(self, data: Any) -> Any:
        return bytes(data)  # litdata-format hands a zero-copy buffer (upstream: bytes)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, _Custom)


def test_custom_serializer(tmp_path: Path) -> None:
    cache = Cache(input_dir=str(tmp_path), serializers={"custom": _CustomSerializer()}, chunk_size=1)
    for i in range(10):
        cache[i] = (_Custom(),)
    cache.done()
    cache.merge()
    assert isinstance(cache[0][0], bytes)
    assert os.path.isdir(cache.checkpoint_dir) and cache.cache_dir == str(tmp_path)
    assert cache.get_chunk_intervals()[:2] == [(0, 0, 1, 1), (1, 1, 2, 2)]


def test_bad_input(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path / "c"), chunk_size=2)
    cache[0] = 1
    with pytest.raises(ValueError, match=r"not complete \(no index.json\)"):
        cache[0]
    with pytest.raises(ValueError, match="either chunk_size or chunk_bytes"):
        Cache(str(tmp_path / "d"), chunk_size=2, chunk_bytes=100)
    with pytest.raises(ValueError, match="local folder"):
        Cache("s3://bucket/data", chunk_size=2)
