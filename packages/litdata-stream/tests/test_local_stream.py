from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset


def _make(path: Path, n: int = 100, chunk_size: int = 7) -> Path:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.full((2,), float(i))})
    writer.done()
    writer.merge()
    return path


def _indexes(batches: list[Any]) -> list[int]:
    return [int(i) for batch in batches for i in batch["index"]]


def test_getitem_and_len(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path))
    assert len(ds) == 100
    assert ds[5]["index"] == 5 and torch.equal(ds[5]["x"], torch.tensor([5.0, 5.0]))
    assert ds[-1]["index"] == 99
    assert [s["index"] for s in ds[10:13]] == [10, 11, 12]
    with pytest.raises(IndexError, match="sample 100 is out of range"):
        ds[100]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
def test_iterate_all(tmp_path: Path, workers: int, shuffle: bool) -> None:
    ds = StreamingDataset(_make(tmp_path), shuffle=shuffle)
    loader = StreamingDataLoader(ds, batch_size=8, num_workers=workers)
    batches = list(loader)
    assert len(batches) == len(loader) == 13
    got = _indexes(batches)
    assert sorted(got) == list(range(100))
    if workers == 0:
        assert (got == list(range(100))) == (not shuffle)


def test_shuffle_changes_with_epoch_and_is_deterministic(tmp_path: Path) -> None:
    path = _make(tmp_path)
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=10)
    first, second = _indexes(list(loader)), _indexes(list(loader))
    assert first != second and sorted(first) == sorted(second)
    again = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=10)
    assert _indexes(list(again)) == first


def test_drop_last(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path), drop_last=True)
    loader = StreamingDataLoader(ds, batch_size=8, num_workers=2)
    batches = list(loader)
    assert len(batches) == len(loader) == 12
    assert all(len(b["index"]) == 8 for b in batches)


@pytest.mark.parametrize(("workers", "stop"), [(0, 3), (2, 5), (3, 1)])
def test_resume_same_topology_is_exact(tmp_path: Path, workers: int, stop: int) -> None:
    path = _make(tmp_path)
    full = _indexes(list(StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=6, num_workers=workers)))
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=6, num_workers=workers)
    seen: list[Any] = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == stop:
            break
    state = loader.state_dict()
    resumed = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=6, num_workers=workers)
    resumed.load_state_dict(state)
    assert len(resumed) == len(loader)  # the whole epoch, as upstream and torchdata count it
    rest = list(resumed)
    assert len(rest) == len(loader) - stop
    assert _indexes(seen) + _indexes(rest) == full


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 0), (0, 2)])
def test_resume_with_other_worker_count(tmp_path: Path, before: int, after: int) -> None:
    path = _make(tmp_path)
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=before)
    seen: list[Any] = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 7:
            break
    state = loader.state_dict()
    resumed = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=after)
    resumed.load_state_dict(state)
    batches = list(resumed)
    assert len(resumed) == 7 + len(batches)  # the 7 delivered before count, as Lightning counts them
    rest = _indexes(batches)
    assert sorted(_indexes(seen) + rest) == list(range(100))


def test_resume_then_next_epoch(tmp_path: Path) -> None:
    path = _make(tmp_path)
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=10)
    list(loader)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    assert state["current_epoch"] == 2
    resumed = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=10)
    resumed.load_state_dict(state)
    assert len(list(resumed)) == 9
    third = _indexes(list(resumed))
    assert resumed.current_epoch == 3 and sorted(third) == list(range(100))


def test_state_mismatch_names_field(tmp_path: Path) -> None:
    path = _make(tmp_path)
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True, seed=1), batch_size=10)
    next(iter(loader))
    state = loader.state_dict()
    other = StreamingDataLoader(StreamingDataset(path, shuffle=True, seed=2), batch_size=10)
    with pytest.raises(ValueError, match="seed=1"):
        other.load_state_dict(state)
    forced = StreamingDataLoader(
        StreamingDataset(path, shuffle=True, seed=2, force_override_state_dict=True), batch_size=10
    )
    forced.load_state_dict(state)


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_get_equal_disjoint_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, world: int) -> None:
    path = _make(tmp_path, n=101)
    per_rank = []
    monkeypatch.setenv("WORLD_SIZE", str(world))
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=2)
        per_rank.append(list(loader))
        assert len(per_rank[-1]) == len(loader)
    assert len({len(batches) for batches in per_rank}) == 1
    everything = [i for batches in per_rank for i in _indexes(batches)]
    assert len(everything) == len(set(everything)) == (101 // (4 * world)) * 4 * world


def test_transform_and_subclass(tmp_path: Path) -> None:
    path = _make(tmp_path, n=10)
    ds = StreamingDataset(path, transform=[lambda s: s["index"], lambda i: i * 2])
    assert ds[3] == 6

    class Doubled(StreamingDataset):
        def transform(self, sample: Any) -> Any:
            return sample["index"] + 1000

    assert list(Doubled(path))[:2] == [1000, 1001]


def test_subsample_and_subset(tmp_path: Path) -> None:
    path = _make(tmp_path)
    half = StreamingDataset(path, subsample=0.5)
    assert len(half) == 50
    picked = [s["index"] for s in half]
    assert len(set(picked)) == 50
    twice = StreamingDataset(path, subsample=2.5)
    assert len(twice) == 250
    sub = StreamingDataset(path).subset(range(10, 20))
    assert len(sub) == 10 and [s["index"] for s in sub] == list(range(10, 20))


def test_subsample_takes_whole_chunks(tmp_path: Path) -> None:
    path = _make(tmp_path)  # 15 chunks of 7 items (the last holds 2)

    def chunks(ds: StreamingDataset) -> dict[int, int]:
        return Counter(int(s["index"]) // 7 for s in ds)

    # floor(0.25 * 100) = 25 items: chunks 0-2 whole and the first 4 items of chunk 3.
    assert [s["index"] for s in StreamingDataset(path, subsample=0.25)] == list(range(25))
    picked = chunks(StreamingDataset(path, subsample=0.25, shuffle=True, seed=3))
    assert sum(picked.values()) == 25
    assert sum(n not in (7, 2) for n in picked.values()) <= 1  # whole chunks but the last one taken
    assert chunks(StreamingDataset(path, subsample=0.25, shuffle=True, seed=3)) == picked  # deterministic
    assert chunks(StreamingDataset(path, subsample=0.25, shuffle=True, seed=4)) != picked
    assert len(StreamingDataset(path, subsample=0.009)) == 0  # floor(0.9) items


@pytest.mark.parametrize("given", ["str", "path", "dir"])
def test_an_open_reads_the_mount_table_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    # Resolving a local path looks for a bucket's mount in /proc/self/mountinfo (~1 ms a read):
    # the dataset resolves its folder once, and every step of the open uses that.
    from litdata_io import Dir, _mounts

    read = _mounts._read_mount_table
    reads: list[str | None] = []

    def counted(mountinfo: str | None) -> str | None:
        reads.append(mountinfo)
        return read(mountinfo)

    path = _make(tmp_path)
    monkeypatch.setattr(_mounts, "_read_mount_table", counted)
    location = {"str": str(path), "path": path, "dir": Dir(path=str(path))}[given]
    assert len(StreamingDataset(location)) == 100
    assert len(reads) == (0 if given == "dir" else 1)  # a Dir's path is taken as it is
