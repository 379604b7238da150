"""StreamingDataLoader.stats(): the training loop's wait per batch and each worker's throughput;
the watchdog's settings (its report and the traced stats: tests/test_loader_watchdog.py)."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_stream import CombinedStreamingDataset, LoaderStallWarning, StreamingDataLoader, StreamingDataset
from litdata_stream._watchdog import batch_samples

N = 103


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    writer = BinaryWriter(tmp_path / "data", chunk_size=10)
    for i in range(N):
        writer.add_item(i, {"index": i, "x": torch.full((4,), float(i))})
    writer.done()
    writer.merge()
    return str(tmp_path / "data")


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_stats_count_every_batch_and_sample(data_dir: str, workers: int) -> None:
    loader = StreamingDataLoader(StreamingDataset(data_dir, shuffle=True), batch_size=8, num_workers=workers)
    assert loader.stats().batches == 0  # before any pass
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoaderStallWarning)  # a healthy run is never reported
        batches = list(loader)
    stats = loader.stats()
    assert stats.batches == len(batches) == len(loader)
    assert [w.worker for w in stats.workers] == list(range(max(workers, 1)))
    assert sum(w.batches for w in stats.workers) == stats.batches
    assert sum(w.samples for w in stats.workers) == N
    assert all(w.batches > 0 and w.samples_per_s > 0 for w in stats.workers)
    assert 0 <= stats.p50_wait_s <= stats.p99_wait_s <= stats.total_wait_s <= stats.seconds
    assert stats.epoch == loader.current_epoch == 1
    assert stats.as_dict()["workers"][0]["worker"] == 0


def test_stats_follow_a_loop_that_stops_early(data_dir: str) -> None:
    loader = StreamingDataLoader(StreamingDataset(data_dir), batch_size=4, num_workers=2)
    for count, _ in enumerate(loader, 1):
        if count == 5:
            break
    stats = loader.stats()
    assert stats.batches == 5
    assert [w.batches for w in stats.workers] == [3, 2]  # round-robin from worker 0
    assert sum(w.samples for w in stats.workers) == 20


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "5"])
def test_bad_watchdog_period_is_refused(data_dir: str, value: object) -> None:
    with pytest.raises(ValueError, match="watchdog_s"):
        StreamingDataLoader(StreamingDataset(data_dir), watchdog_s=value)  # type: ignore[arg-type]


def test_watchdog_env_knob(data_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_WATCHDOG_S", "soon")
    with pytest.raises(ValueError, match="LITDATA_WATCHDOG_S"):
        StreamingDataLoader(StreamingDataset(data_dir))
    monkeypatch.setenv("LITDATA_WATCHDOG_S", "0")
    assert StreamingDataLoader(StreamingDataset(data_dir))._watchdog is None
    monkeypatch.setenv("LITDATA_WATCHDOG_S", "45")
    watchdog = StreamingDataLoader(StreamingDataset(data_dir), num_workers=2)._watchdog
    assert watchdog is not None and watchdog.seconds == 45 and watchdog.board.slots == 2


def test_time_between_batches_is_not_a_stall(data_dir: str) -> None:
    loader = StreamingDataLoader(StreamingDataset(data_dir), batch_size=50, num_workers=0, watchdog_s=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoaderStallWarning)
        for _ in loader:
            # A long training step: the loop is not waiting for the loader. Longer than the limit
            # plus the watchdog's check period (a quarter of it): a clock running between batches would report.
            time.sleep(3)
    assert loader._watchdog is not None and loader._watchdog.reports == 0
    assert loader.stats().batches == 3


def test_stats_of_a_combined_dataset(data_dir: str) -> None:
    combined = CombinedStreamingDataset([StreamingDataset(data_dir), StreamingDataset(data_dir)], iterate_over_all=True)
    loader = StreamingDataLoader(combined, batch_size=8, num_workers=2)
    batches = list(loader)
    stats = loader.stats()
    assert stats.batches == len(batches)
    assert sum(w.samples for w in stats.workers) == sum(len(batch["index"]) for batch in batches) == 2 * N
    assert all(w.batches > 0 for w in stats.workers)


@pytest.mark.parametrize(
    ("batch", "samples"),
    [
        ({"index": torch.zeros(8), "x": torch.zeros(8, 4)}, 8),  # litdata_collate / default_collate
        ((torch.zeros(5, 2), torch.zeros(5)), 5),
        ((["a", "b"], torch.zeros(2)), 2),  # strings collate to a list
        ([{"a": 1}, {"a": 2}, {"a": 3}], 3),  # a collate_fn that keeps the samples
        ([1, 2, 3, 4], 4),
        ({}, 0),
    ],
)
def test_batch_samples(batch: object, samples: int) -> None:
    assert batch_samples(batch) == samples
