"""A StreamingDataLoader has its dataset make the batches (gathered as arrays when the samples
are laid out alike); the batches must be exactly those torch's own batching of the samples gives."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from litdata_format import BinaryWriter, TokensLoader
from litdata_stream import StreamingDataLoader, StreamingDataset, litdata_collate
from litdata_stream._dataset import reader_of


def _write(path: Path, samples: list[Any], **kwargs: Any) -> Path:
    writer = BinaryWriter(path, **kwargs)
    for i, sample in enumerate(samples):
        writer.add_item(i, sample)
    writer.done()
    writer.merge()
    return path


def _records(n: int) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "score": i / 7,
            "even": i % 2 == 0,
            "tokens": np.arange(6, dtype=np.int32) + i,
            "grid": np.full((2, 3), i, dtype=np.float32),
        }
        for i in range(n)
    ]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


def _torch_batches(make: Callable[[], StreamingDataset], batch_size: int, workers: int) -> list[Any]:
    """The reference: torch's DataLoader batching the dataset's samples with litdata_collate."""
    ds = make()
    ds.set_batch_size(batch_size)
    ds.set_num_workers(workers)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers, collate_fn=litdata_collate,
                        drop_last=ds.drop_last)  # fmt: skip
    return list(loader)


def _assert_same_batches(make: Callable[[], StreamingDataset], batch_size: int, workers: int) -> list[Any]:
    expected = _torch_batches(make, batch_size, workers)
    got = list(StreamingDataLoader(make(), batch_size=batch_size, num_workers=workers))
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert _equal(a, b), f"batch {i} differs"
    return got


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True])
def test_fixed_size_records_batch_like_torch(tmp_path: Path, workers: int, shuffle: bool) -> None:
    path = _write(tmp_path / "d", _records(203), chunk_size=16)
    got = _assert_same_batches(lambda: StreamingDataset(path, shuffle=shuffle), 10, workers)
    assert got[0]["index"].dtype == torch.int64 and got[0]["score"].dtype == torch.float64
    assert got[0]["even"].dtype == torch.bool and got[0]["grid"].shape == (10, 2, 3)
    seen = torch.cat([b["index"] for b in got]).tolist()
    assert sorted(seen) == list(range(203))


@pytest.mark.parametrize("workers", [0, 2])
def test_drop_last_subsample_and_window_shuffle(tmp_path: Path, workers: int, monkeypatch: Any) -> None:
    path = _write(tmp_path / "d", _records(150), chunk_size=11)
    _assert_same_batches(lambda: StreamingDataset(path, shuffle=True, drop_last=True), 8, workers)
    _assert_same_batches(lambda: StreamingDataset(path, shuffle=True, subsample=0.6), 8, workers)
    monkeypatch.setenv("LITDATA_POSIX_FAST", "1")
    monkeypatch.setenv("LITDATA_POSIX_SHUFFLE_WINDOW", "5")
    _assert_same_batches(lambda: StreamingDataset(path, shuffle=True), 8, workers)


@pytest.mark.parametrize("workers", [0, 2])
def test_samples_not_laid_out_alike_fall_back_to_one_by_one(tmp_path: Path, workers: int) -> None:
    # Each chunk holds arrays of one length (another per chunk): gathered chunk by chunk.
    per_chunk = [{"index": i, "tokens": np.arange(3 + i // 10, dtype=np.int64)} for i in range(40)]
    path = _write(tmp_path / "per_chunk", per_chunk, chunk_size=10)
    got = _assert_same_batches(lambda: StreamingDataset(path), 10, workers)
    assert sorted(b["tokens"].shape[1] for b in got) == [3, 4, 5, 6]
    # Lengths vary inside a chunk: read one by one.
    varying = [{"index": i, "tokens": np.arange(3 + i % 3, dtype=np.int64)} for i in range(30)]
    path = _write(tmp_path / "varying", varying, chunk_size=10)
    _assert_same_batches(lambda: StreamingDataset(path, shuffle=True), 1, workers)
    texts = _write(tmp_path / "texts", [{"index": i, "name": f"n{i}"} for i in range(30)], chunk_size=7)
    got = _assert_same_batches(lambda: StreamingDataset(texts, shuffle=True), 4, workers)
    assert isinstance(got[0]["name"], list) and isinstance(got[0]["name"][0], str)


@pytest.mark.parametrize("as_tensor", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_token_blocks_batch_like_torch(tmp_path: Path, as_tensor: bool, workers: int) -> None:
    docs = [np.arange(i * 100, i * 100 + 37 + i, dtype=np.int32) for i in range(40)]
    samples: list[Any] = [torch.from_numpy(d) for d in docs] if as_tensor else docs
    path = _write(tmp_path / "t", samples, chunk_size=300, item_loader=TokensLoader())
    got = _assert_same_batches(
        lambda: StreamingDataset(path, item_loader=TokensLoader(block_size=17), shuffle=True), 6, workers
    )
    assert isinstance(got[0], torch.Tensor) and got[0].dtype == torch.int32 and got[0].shape[1] == 17


def test_user_collate_and_transform_see_samples(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", _records(20), chunk_size=6)
    seen: list[int] = []

    def collate(batch: list[Any]) -> list[int]:
        seen.append(len(batch))
        return [s["index"] for s in batch]

    assert list(StreamingDataLoader(StreamingDataset(path), batch_size=8, collate_fn=collate)) == [
        list(range(8)), list(range(8, 16)), list(range(16, 20))
    ]  # fmt: skip
    assert seen == [8, 8, 4]
    doubled = StreamingDataset(path, transform=lambda s: {"index": s["index"] * 2})
    batches = list(StreamingDataLoader(doubled, batch_size=8))
    assert batches[0]["index"].tolist() == list(range(0, 16, 2))


def test_loader_reports_the_users_settings_and_dataset_still_yields_samples(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", _records(20), chunk_size=6)
    ds = StreamingDataset(path, drop_last=True)
    loader = StreamingDataLoader(ds, batch_size=8)
    assert loader.batch_size == 8 and loader.drop_last is True
    assert [len(b["index"]) for b in loader] == [8, 8]
    assert loader.batch_size == 8
    first = next(iter(ds))
    assert isinstance(first, dict) and first["index"] == 0  # a sample, not a batch


def test_resume_mid_epoch_with_batches_made_by_the_dataset(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", _records(100), chunk_size=9)
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=7, num_workers=2)
    seen: list[int] = []
    for i, batch in enumerate(loader):
        seen += batch["index"].tolist()
        if i == 5:
            break
    state = loader.state_dict()
    resumed = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=7, num_workers=3)
    resumed.load_state_dict(state)
    for batch in resumed:
        seen += batch["index"].tolist()
    assert sorted(seen) == list(range(100))


def test_big_batches_from_workers_travel_as_shared_tensors(tmp_path: Path) -> None:
    big = [{"index": i, "image": np.full((256, 600), i, dtype=np.float32)} for i in range(12)]  # 600 KB each
    path = _write(tmp_path / "big", big, chunk_size=5)
    got = _assert_same_batches(lambda: StreamingDataset(path, shuffle=True), 3, 2)
    assert sorted(torch.cat([b["index"] for b in got]).tolist()) == list(range(12))
    assert all(b["image"].shape == (3, 256, 600) for b in got)


def test_the_pipe_from_the_workers_holds_a_whole_array_batch(tmp_path: Path) -> None:
    import fcntl

    from litdata_stream._collate import ArrayBatch

    path = _write(tmp_path / "records", _records(40), chunk_size=8)
    loader = StreamingDataLoader(StreamingDataset(path), batch_size=4, num_workers=2, persistent_workers=True)
    seen = []
    for batch in loader:
        reader = loader._iterator._worker_result_queue._reader  # pyright: ignore[reportOptionalMemberAccess, reportAttributeAccessIssue]
        seen.append(fcntl.fcntl(reader.fileno(), fcntl.F_GETPIPE_SZ))  # pyright: ignore[reportAttributeAccessIssue]
        assert len(batch["index"]) == 4
    assert seen and set(seen) == {ArrayBatch.LIMIT}


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_bundled_batches_come_out_in_torchs_order(tmp_path: Path, workers: int, drop_last: bool) -> None:
    # 203 samples of 6 in batches of 5 over 3 workers: shares of uneven length, a short last bundle
    # per worker, and workers that run out at different times.
    path = _write(tmp_path / "d", _records(203), chunk_size=16)
    _assert_same_batches(lambda: StreamingDataset(path, shuffle=True, drop_last=drop_last), 5, workers)


def test_workers_send_several_small_batches_per_message(tmp_path: Path) -> None:
    from litdata_stream._collate import BUNDLE_BYTES, MAX_BUNDLE, bundle_size

    assert bundle_size(BUNDLE_BYTES / 3) == 3 and bundle_size(BUNDLE_BYTES * 2) == 1 and bundle_size(10) == MAX_BUNDLE
    path = _write(tmp_path / "d", _records(400), chunk_size=16)
    loader = StreamingDataLoader(StreamingDataset(path), batch_size=4, num_workers=2, persistent_workers=True)
    assert len(list(loader)) == 100
    # torch's request count: a bundle of MAX_BUNDLE batches per request, and a few requests the
    # workers got after their last batch (torch keeps prefetch_factor requests out per worker)
    assert loader._iterator._rcvd_idx < 100 // 4  # pyright: ignore[reportOptionalMemberAccess, reportAttributeAccessIssue]
    # a dataset whose samples are read one by one (a transform) sends one batch per message
    plain = StreamingDataLoader(
        StreamingDataset(path, transform=lambda s: s), batch_size=4, num_workers=2, persistent_workers=True
    )
    assert len(list(plain)) == 100
    assert plain._iterator._rcvd_idx >= 100  # pyright: ignore[reportOptionalMemberAccess, reportAttributeAccessIssue]


def test_resume_with_bundled_batches_on_another_number_of_workers(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", _records(301), chunk_size=13)
    for stop, before, after in [(3, 2, 3), (11, 3, 1), (20, 1, 2)]:
        loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=6, num_workers=before)
        seen: list[int] = []
        for i, batch in enumerate(loader):
            seen += batch["index"].tolist()
            if i == stop:
                break
        resumed = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=6, num_workers=after)
        resumed.load_state_dict(loader.state_dict())
        for batch in resumed:
            seen += batch["index"].tolist()
        assert sorted(seen) == list(range(301)), (stop, before, after)


def test_a_streaming_pass_unmaps_each_chunk_when_done(tmp_path: Path) -> None:
    path = _write(tmp_path / "d", _records(60), chunk_size=10)
    ds = StreamingDataset(path, shuffle=True)
    assert sum(len(b["index"]) for b in StreamingDataLoader(ds, batch_size=7)) == 60
    source: Any = reader_of(ds).source()
    assert source._chunks.open_numbers == ()  # the pages a pass touched leave the process's RSS
    assert [ds[i]["index"] for i in (0, 15, 59)] == [0, 15, 59]
    assert len(source._chunks.open_numbers) == 3  # random access keeps chunks mapped for the next read


def test_a_learned_layout_is_not_taken_for_rows_laid_out_otherwise(tmp_path: Path) -> None:
    # Rows of one size whose leaves split it otherwise (x of 4 and y of 2 int32, then 2 and 4): the
    # layout learned from the first chunks must be refused for the others (the few-rows check).
    samples = [
        {"i": i, "x": np.full(4 if i < 8 else 2, i, dtype=np.int32), "y": np.full(2 if i < 8 else 4, i, dtype=np.int32)}
        for i in range(16)
    ]
    path = _write(tmp_path / "ds", samples, chunk_size=4)
    got = _assert_same_batches(lambda: StreamingDataset(path, shuffle=True), 4, 0)
    assert sorted(tuple(b["x"].shape) for b in got) == [(4, 2), (4, 2), (4, 4), (4, 4)]
