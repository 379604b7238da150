"""Map-style use: ``__getitems__`` batch fetch and random access."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Subset

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataset


def _make(path: Path, n: int = 100, chunk_size: int = 7) -> Path:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.full((3,), float(i))})
    writer.done()
    writer.merge()
    return path


def test_getitems_returns_samples_in_the_order_asked(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path))
    wanted = [57, 3, 99, 4, 56, 3, -1, 0]
    got = ds.__getitems__(wanted)
    assert [s["index"] for s in got] == [57, 3, 99, 4, 56, 3, 99, 0]
    assert torch.equal(got[0]["x"], torch.full((3,), 57.0))
    assert ds.__getitems__([]) == []
    with pytest.raises(IndexError, match="sample 100 is out of range"):
        ds.__getitems__([1, 100])
    with pytest.raises(IndexError, match="sample -101 is out of range"):
        ds.__getitems__([-101])


def test_getitems_respects_subsample_subset_and_transform(tmp_path: Path) -> None:
    path = _make(tmp_path)
    sub = StreamingDataset(path, transform=lambda s: s["index"] * 10).subset([5, 50, 95, 51])  # kept sorted
    assert sub.__getitems__([3, 0, 2, 1]) == [950, 50, 510, 500]
    assert sub.__getitems__([3, 0]) == [sub[3], sub[0]]
    half = StreamingDataset(path, subsample=0.5)
    assert [s["index"] for s in half.__getitems__(range(len(half)))] == [s["index"] for s in half]


def test_getitems_follows_a_subclass_getitem(tmp_path: Path) -> None:
    class Plus(StreamingDataset):
        def __getitem__(self, index: Any) -> Any:
            return super().__getitem__(index)["index"] + 1000

    ds = Plus(_make(tmp_path))
    assert ds.__getitems__([2, 1]) == [1002, 1001]
    assert list(ds)[:2] == [1000, 1001]


@pytest.mark.parametrize("workers", [0, 2])
def test_map_style_dataloader_batches_through_getitems(tmp_path: Path, workers: int) -> None:
    ds = StreamingDataset(_make(tmp_path))
    indices = list(range(99, -1, -3))
    loader = DataLoader(Subset(ds, indices), batch_size=8, shuffle=False, num_workers=workers)
    got = [int(i) for batch in loader for i in batch["index"]]
    assert got == indices


def _with_keys(path: Path) -> Path:
    from litdata_format import load_index
    from litdata_format.internal import KEYS_FILE, keys_parquet

    _make(path)
    sizes = [c.chunk_size for c in load_index(path).chunks]
    (path / KEYS_FILE).parent.mkdir()
    (path / KEYS_FILE).write_bytes(keys_parquet([(f"id-{i}", i) for i in range(100)], sizes))
    return path


def test_get_by_key_reaches_every_sample_whatever_subsample_keeps(tmp_path: Path) -> None:
    ds = StreamingDataset(_with_keys(tmp_path), subsample=0.2)
    assert len(ds) == 20
    assert ds["id-93"]["index"] == 93 and ds.get_by_key("id-0")["index"] == 0
    assert ds[5]["index"] == 5  # an int is still a position
    with pytest.raises(KeyError, match="has the key 'id-100'"):
        ds["id-100"]


def test_get_by_key_without_a_key_index_says_how_to_get_one(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path))
    with pytest.raises(KeyError, match=r"no key index \(keys/shard-00000.parquet\).*key_fn"):
        ds["anything"]
