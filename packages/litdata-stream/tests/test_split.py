"""train_test_split and the views it builds on (subset, subsample)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset, train_test_split


def _make(path: Path, n: int = 100, chunk_size: int = 7) -> Path:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.zeros(1)})
    writer.done()
    writer.merge()
    return path


def _ids(ds: StreamingDataset) -> list[int]:
    return [int(s["index"]) for s in ds]


def test_splits_are_disjoint_and_sized(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path))
    train, val, test = train_test_split(ds, splits=[0.3, 0.2, 0.5])
    assert (len(train), len(val), len(test)) == (30, 20, 50)
    ids = [_ids(train), _ids(val), _ids(test)]
    assert sorted(ids[0] + ids[1] + ids[2]) == list(range(100))
    # Each split reads about its share of the chunk files, not all of them.
    assert len({i // 7 for i in ids[0]}) <= 30 // 7 + 2


def test_split_is_deterministic_and_follows_the_seed(tmp_path: Path) -> None:
    path = _make(tmp_path)
    a = [_ids(d) for d in train_test_split(StreamingDataset(path), [0.5, 0.5], seed=1)]
    b = [_ids(d) for d in train_test_split(StreamingDataset(path), [0.5, 0.5], seed=1)]
    c = [_ids(d) for d in train_test_split(StreamingDataset(path), [0.5, 0.5], seed=2)]
    assert a == b and a != c
    ordered = [_ids(d) for d in train_test_split(StreamingDataset(path), [0.25, 0.75], shuffle=False)]
    assert ordered == [list(range(25)), list(range(25, 100))]


def test_split_leaves_the_rest_out_and_rounds_as_upstream(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path))
    first, second = train_test_split(ds, [0.29, 0.1])
    assert (len(first), len(second)) == (28, 10)  # int(100 * 0.29), as upstream: its members too
    parts = train_test_split(ds, [0.1, 0.2, 0.7])  # sums to 1.0000000000000002
    assert sum(len(p) for p in parts) == 100


def test_split_of_a_subsample_and_of_a_subset(tmp_path: Path) -> None:
    path = _make(tmp_path)
    small = StreamingDataset(path, subsample=0.5)
    a, b = train_test_split(small, [0.5, 0.5])
    assert len(a) == len(b) == 25
    assert not set(_ids(a)) & set(_ids(b))
    assert set(_ids(a)) | set(_ids(b)) == {int(s["index"]) for s in small}
    # A subsample drawn with shuffle (upstream pairs its chunks with the wrong regions there).
    drawn = StreamingDataset(path, subsample=0.5, shuffle=True, seed=3)
    c, d = train_test_split(drawn, [0.5, 0.5], seed=1)
    assert len(c) == len(d) == 25 and not set(_ids(c)) & set(_ids(d))
    assert set(_ids(c)) | set(_ids(d)) == set(_ids(drawn))
    part = StreamingDataset(path).subset(range(40, 60))
    x, y = train_test_split(part, [0.5, 0.5])
    assert sorted(_ids(x) + _ids(y)) == list(range(40, 60))


def test_splits_stream_through_the_loader(tmp_path: Path) -> None:
    train, val = train_test_split(StreamingDataset(_make(tmp_path), shuffle=True), [0.8, 0.2])
    got = [int(i) for b in StreamingDataLoader(train, batch_size=8, num_workers=2) for i in b["index"]]
    assert sorted(got) == sorted(_ids(train)) and len(got) == 80
    assert not set(got) & set(_ids(val))


@pytest.mark.parametrize(
    ("splits", "message"),
    [
        ([0.5, 0.6], "sum to 1.1"),
        ([1.5], r"fraction in \[0, 1\]"),
        ([-0.1], "fraction"),
        (["a"], "fraction"),
        ([], "empty"),
    ],
)
def test_bad_splits(tmp_path: Path, splits: list, message: str) -> None:
    ds = StreamingDataset(_make(tmp_path, n=10))
    with pytest.raises(ValueError, match=message):
        train_test_split(ds, splits)


def test_empty_split_warns(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path, n=10))
    with pytest.warns(UserWarning, match="empty split"):
        parts = train_test_split(ds, [0.9, 0.05])
    assert [len(p) for p in parts] == [9, 0]
