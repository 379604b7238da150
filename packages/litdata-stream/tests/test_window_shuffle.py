"""The window shuffle for network filesystems, its detection, and LITDATA_POSIX_FAST."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset
from litdata_stream._dataset import reader_of
from litdata_stream._pass_plan import Topology, consumed_per_worker, remaining_base, split_base
from litdata_stream._shuffle import WindowOrder, window_permutation
from litdata_stream._sources.posix import detect_posix, filesystem_of, shuffle_window
from litdata_stream._sources.remote import RemoteSource
from litdata_stream._sources.source import LocalSource

MOUNTS = """\
sysfs /sys sysfs rw,nosuid 0 0
/dev/sda1 / ext4 rw,relatime 0 0
server:/export /mnt/nfs nfs4 rw,relatime,vers=4.2 0 0
10.0.0.1@tcp:/lustre /scratch lustre rw 0 0
/dev/sdb1 /mnt/nfs/local\\040disk xfs rw 0 0
gpfs0 /gpfs gpfs rw 0 0
"""


def _make(path: Path, n: int = 200, chunk_size: int = 10) -> Path:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.full((2,), float(i))})
    writer.done()
    writer.merge()
    return path


def _indexes(batches: list[Any]) -> list[int]:
    return [int(i) for batch in batches for i in batch["index"]]


def _flat(order: WindowOrder, intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(chunk, item) in the order a worker reads ``intervals``."""
    out = []
    for piece in order.pieces(order.read_order(intervals)):
        out.extend((piece.chunk, int(i)) for i in order.within(piece.chunk)[piece.lo : piece.hi])
    return out


@pytest.mark.parametrize("window", [1, 2, 5, 16])
def test_window_permutation_moves_nothing_farther_than_the_window(window: int) -> None:
    rng = np.random.default_rng(0)
    for count in (0, 1, 2, 7, 100):
        perm = window_permutation(count, window, rng)
        assert sorted(perm.tolist()) == list(range(count))
        if count:
            assert int(np.abs(perm - np.arange(count)).max()) < window
    assert window_permutation(50, 1, rng).tolist() == list(range(50))


def test_window_order_is_a_deterministic_local_shuffle() -> None:
    lengths = [10] * 40
    first = WindowOrder(lengths, seed=1, epoch=1, window=4)
    again = WindowOrder(lengths, seed=1, epoch=1, window=4)
    other = WindowOrder(lengths, seed=1, epoch=2, window=4)
    everything = [(0, len(first))]
    read = _flat(first, everything)
    assert sorted(read) == [(c, i) for c in range(40) for i in range(10)]
    assert read == _flat(again, everything)
    assert read != _flat(other, everything)
    # S keeps the storage order of chunks (rotated per epoch), so a worker's stripe is sequential.
    order = first.chunk_order.tolist()
    assert order == [(order[0] + k) % 40 for k in range(40)]
    assert other.chunk_order.tolist() != order
    # Chunks are read at most window - 1 places from their stripe position.
    pieces = first.read_order(everything)
    starts = [start for start, _ in pieces]
    ranks = np.argsort(starts)
    assert int(np.abs(ranks - np.arange(len(ranks))).max()) < 4


def test_window_resume_from_any_topology_loses_and_repeats_nothing() -> None:
    lengths = [7, 10, 3, 10, 10, 1, 10, 9, 10, 10, 10, 4]
    order = WindowOrder(lengths, seed=3, epoch=1, window=3)
    total = len(order)
    before = Topology(world_size=2, num_workers=3, batch_size=2, drop_last=False)
    plans = split_base([(0, total)], before)
    for delivered in range(0, 12):
        consumed = [consumed_per_worker(rank, 2, False, delivered)[0] for rank in plans]
        seen = []
        for rank, done in zip(plans, consumed):
            for plan, count in zip(rank, done):
                read = [p for start, end in order.read_order(plan.intervals) for p in range(start, end)]
                seen.extend(read[:count])
        base = remaining_base(plans, consumed, order)
        left = [p for start, end in base for p in range(start, end)]
        assert sorted(seen + left) == list(range(total))
        assert base == sorted(base)


def test_filesystem_detection_from_proc_mounts() -> None:
    assert filesystem_of("/mnt/nfs/data", MOUNTS) == "nfs4"
    assert filesystem_of("/mnt/nfs", MOUNTS) == "nfs4"
    assert filesystem_of("/mnt/nfsx", MOUNTS) == "ext4"
    assert filesystem_of("/mnt/nfs/local disk/ds", MOUNTS) == "xfs"
    assert filesystem_of("/scratch/run", MOUNTS) == "lustre"
    assert filesystem_of("/home/me", MOUNTS) == "ext4"
    assert filesystem_of("/x", "") is None


def test_detect_posix_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITDATA_POSIX_FAST", raising=False)
    monkeypatch.delenv("LITDATA_POSIX_SHUFFLE_WINDOW", raising=False)
    assert detect_posix("/home/me/ds", MOUNTS).window is None
    for path in ("/mnt/nfs/ds", "/scratch/ds", "/gpfs/ds"):
        profile = detect_posix(path, MOUNTS)
        assert profile.in_place and profile.window == 16
    assert detect_posix(None, MOUNTS).in_place is False  # URLs go through the cache
    monkeypatch.setenv("LITDATA_POSIX_SHUFFLE_WINDOW", "5")
    assert detect_posix("/mnt/nfs/ds", MOUNTS).window == 5 == shuffle_window()
    monkeypatch.setenv("LITDATA_POSIX_FAST", "1")
    assert detect_posix("/home/me/ds", MOUNTS).window == 5
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    profile = detect_posix("/mnt/nfs/ds", MOUNTS)
    assert not profile.in_place and profile.window is None
    monkeypatch.setenv("LITDATA_POSIX_FAST", "maybe")
    with pytest.raises(ValueError, match="LITDATA_POSIX_FAST='maybe'"):
        detect_posix("/x", MOUNTS)
    monkeypatch.setenv("LITDATA_POSIX_FAST", "1")
    monkeypatch.setenv("LITDATA_POSIX_SHUFFLE_WINDOW", "0")
    with pytest.raises(ValueError, match=r"LITDATA_POSIX_SHUFFLE_WINDOW=.0. is refused: it takes a whole number >= 1"):
        detect_posix("/x", MOUNTS)


@pytest.mark.parametrize("workers", [0, 2])
def test_forced_window_shuffle_streams_every_sample_in_local_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setenv("LITDATA_POSIX_FAST", "1")
    monkeypatch.setenv("LITDATA_POSIX_SHUFFLE_WINDOW", "3")
    path = _make(tmp_path)
    ds = StreamingDataset(path, shuffle=True)
    assert ds.shuffle_mode == "window:3"
    assert isinstance(reader_of(ds).source(), LocalSource)
    loader = StreamingDataLoader(ds, batch_size=8, num_workers=workers)
    first = _indexes(list(loader))
    second = _indexes(list(loader))
    assert sorted(first) == sorted(second) == list(range(200))
    assert first != second
    assert first != sorted(first)
    if workers == 0:
        # One worker reads chunk after chunk: consecutive samples stay in nearby chunks.
        chunks = [i // 10 for i in first]
        hops = [min(abs(a - b), 20 - abs(a - b)) for a, b in itertools.pairwise(chunks)]
        assert max(hops) < 2 * 3
    again = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=8, num_workers=workers)
    assert _indexes(list(again)) == first
    plain = StreamingDataset(path, shuffle=False)
    assert plain.shuffle_mode == "none"
    assert [s["index"] for s in plain] == list(range(200))


@pytest.mark.parametrize(("before", "after"), [(2, 2), (2, 3), (0, 2), (3, 1)])
def test_window_shuffle_resumes_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: int, after: int
) -> None:
    monkeypatch.setenv("LITDATA_POSIX_FAST", "1")
    monkeypatch.setenv("LITDATA_POSIX_SHUFFLE_WINDOW", "4")
    path = _make(tmp_path, n=203, chunk_size=9)

    def loader(workers: int) -> StreamingDataLoader:
        return StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=5, num_workers=workers)

    full = _indexes(list(loader(before)))
    interrupted = loader(before)
    seen: list[Any] = []
    for batch in interrupted:
        seen.append(batch)
        if len(seen) == 9:
            break
    state = interrupted.state_dict()
    assert state["dataset"]["shuffle_mode"] == "window:4"
    resumed = loader(after)
    resumed.load_state_dict(state)
    rest = _indexes(list(resumed))
    if before == after:
        assert _indexes(seen) + rest == full
    else:
        assert sorted(_indexes(seen) + rest) == list(range(203))


def test_state_from_another_shuffle_mode_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _make(tmp_path)
    monkeypatch.setenv("LITDATA_POSIX_FAST", "1")
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4)
    next(iter(loader))
    state = loader.state_dict()
    monkeypatch.delenv("LITDATA_POSIX_FAST")
    other = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4)
    with pytest.raises(ValueError, match="shuffle_mode='window:16'"):
        other.load_state_dict(state)


def test_posix_fast_off_reads_through_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    path = _make(tmp_path / "data")
    ds = StreamingDataset(path, cache_dir=str(tmp_path / "cache"), shuffle=True)
    assert isinstance(reader_of(ds).source(), RemoteSource) and ds.shuffle_mode == "full"
    assert ds[13]["index"] == 13
    loader = StreamingDataLoader(ds, batch_size=16, num_workers=2)
    assert sorted(_indexes(list(loader))) == list(range(200))
    assert list((tmp_path / "cache").rglob("chunk-*"))
