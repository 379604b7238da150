"""Many small local chunks (issue 29): their rows are read straight from the files into each batch,
without opening a chunk object, and the batches are still exactly those torch's batching gives."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset, litdata_collate
from litdata_stream._dataset import reader_of


def _write(path: Path, samples: list[Any], chunk_size: int = 4) -> Path:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i, sample in enumerate(samples):
        writer.add_item(i, sample)
    writer.done()
    writer.merge()
    return path


def _records(n: int) -> list[dict[str, Any]]:
    return [{"i": i, "x": np.arange(4, dtype=np.int32) + i} for i in range(n)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a == b


def _assert_like_torch(make: Callable[[], StreamingDataset], batch_size: int, workers: int) -> list[Any]:
    reference = make()
    reference.set_batch_size(batch_size)
    reference.set_num_workers(workers)
    expected = list(DataLoader(reference, batch_size=batch_size, num_workers=workers, collate_fn=litdata_collate))
    got = list(StreamingDataLoader(make(), batch_size=batch_size, num_workers=workers))
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert _same(a, b), f"batch {i} differs"
    return got


def test_small_chunks_are_read_without_opening_them(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", _records(60))
    ds = StreamingDataset(path, shuffle=True)
    seen: list[int] = []
    for batch in StreamingDataLoader(ds, batch_size=6):  # batches end inside chunks of 4
        seen += batch["i"].tolist()
        source: Any = reader_of(ds).source()
        assert source._chunks.open_numbers == ()  # the rows came from the files, no chunk was opened
    assert sorted(seen) == list(range(60))


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_across_many_small_chunks_are_torchs(tmp_path: Path, workers: int) -> None:
    path = _write(tmp_path / "d", _records(203))
    got = _assert_like_torch(lambda: StreamingDataset(path, shuffle=True), 10, workers)
    assert sorted(torch.cat([b["i"] for b in got]).tolist()) == list(range(203))
    _assert_like_torch(lambda: StreamingDataset(path, shuffle=True, subsample=0.7, drop_last=True), 7, workers)


def test_chunks_whose_rows_change_layout_or_cannot_be_read_directly(tmp_path: Path) -> None:
    # Rows of one size whose leaves split it otherwise from sample 20 on: a chunk read with the layout
    # learned from another goes back to the usual gather (batches of one chunk: torch cannot stack
    # samples of both layouts into one batch either).
    samples = [
        {"i": i, "x": np.full(4 if i < 20 else 2, i, np.int32), "y": np.full(2 if i < 20 else 4, i, np.int32)}
        for i in range(40)
    ]
    path = _write(tmp_path / "layouts", samples)
    got = _assert_like_torch(lambda: StreamingDataset(path, shuffle=True), 4, 0)
    assert sorted(tuple(b["x"].shape) for b in got) == [(4, 2)] * 5 + [(4, 4)] * 5
    # Chunks that are links inside the folder (opened the usual way, which checks where they lead)
    # in the middle of batches of 12 read from the files.
    path = _write(tmp_path / "links", _records(100))
    for name in ("chunk-0-3.bin", "chunk-0-10.bin"):
        os.replace(path / name, path / f"moved-{name}")
        (path / name).symlink_to(f"moved-{name}")
    got = _assert_like_torch(lambda: StreamingDataset(path, shuffle=True), 12, 0)
    assert sorted(torch.cat([b["i"] for b in got]).tolist()) == list(range(100))


def test_a_corrupt_small_chunk_fails_with_its_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", _records(40))
    corrupt = path / "chunk-0-5.bin"
    data = bytearray(corrupt.read_bytes())
    data[4] ^= 1
    corrupt.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"chunk-0-5\.bin: the offsets table is corrupt"):
        list(StreamingDataLoader(StreamingDataset(path), batch_size=6))


@pytest.mark.parametrize(("before", "after"), [(0, 2), (2, 0)])
def test_resuming_inside_a_small_chunk_replays_nothing_and_skips_nothing(
    tmp_path: Path, before: int, after: int
) -> None:
    path = _write(tmp_path / "d", _records(150))
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=7, num_workers=before)
    seen: list[int] = []
    for i, batch in enumerate(loader):
        seen += batch["i"].tolist()
        if i == 4:
            break
    resumed = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=7, num_workers=after)
    resumed.load_state_dict(loader.state_dict())
    for batch in resumed:
        seen += batch["i"].tolist()
    assert sorted(seen) == list(range(150))
