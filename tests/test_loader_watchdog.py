"""The hang watchdog: a chunk download stalled behind the fault proxy is reported (warning and
tracer), naming the chunk's URL and the worker stuck on it; a healthy run reports nothing. The
pass's stats() reach the tracer log too."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_io import enable_tracer, get_storage
from litdata_stream import LoaderStallWarning, StreamingDataLoader, StreamingDataset
from litracer import convert_file
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

N = 60


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server.endpoint) as running:
        yield running


@pytest.fixture
def url(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> str:
    local = tmp_path / "local"
    writer = BinaryWriter(local, chunk_size=10)
    for i in range(N):
        writer.add_item(i, {"index": i, "x": torch.full((8,), float(i))})
    writer.done()
    writer.merge()
    storage = get_storage(f"s3://{s3_bucket}/data", s3_server.storage_options())
    for path in sorted(local.iterdir()):
        storage.upload(path, path.name)
    return f"s3://{s3_bucket}/data"


def _loader(url: str, s3_server: S3Server, proxy: FaultProxy, cache: Path, **options: object) -> StreamingDataLoader:
    # A long request timeout: the stalled request is waited out, not abandoned early.
    storage_options = {**s3_server.storage_options(proxy.endpoint), "timeout": 60.0, "request_timeout": 120.0}
    dataset = StreamingDataset(url, cache_dir=str(cache), storage_options=storage_options)
    return StreamingDataLoader(dataset, batch_size=5, **options)  # type: ignore[arg-type]


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Tracing at the "batch" level into a fresh log, off again (and its variables undone) after."""
    for name in ("LITDATA_LOG_FILE", "LITDATA_TRACE_LEVEL", "LITDATA_TRACE_CATEGORIES"):
        monkeypatch.setenv(name, "")  # recorded, so the variables enable_tracer writes are undone after
        monkeypatch.delenv(name)
    path = tmp_path / "trace.log"
    enable_tracer("batch", log_file=path)
    try:
        yield path
    finally:
        enable_tracer("off", log_file=path)


@pytest.mark.parametrize("workers", [0, 2])
def test_stalled_download_is_reported(
    url: str, s3_server: S3Server, proxy: FaultProxy, tmp_path: Path, log: Path, workers: int
) -> None:
    stalled = "chunk-0-3.bin"
    proxy.inject("stall", method="GET", path_contains=stalled, stall=5.0)  # the watchdog (2 s) reports within 2.5 s
    loader = _loader(url, s3_server, proxy, tmp_path / "cache", num_workers=workers, watchdog_s=2)
    with pytest.warns(LoaderStallWarning) as caught:
        indexes = [int(i) for batch in loader for i in batch["index"]]
    enable_tracer("off", log_file=log)
    events = convert_file(log).trace["traceEvents"]
    [stats] = [e["args"] for e in events if e["name"] == "loader_stats"]  # the pass's stats() reach litracer
    assert stats["batches"] == loader.stats().batches == N // 5
    assert [key for key in stats if key.endswith("_samples_per_s")] == [f"worker{w}_samples_per_s" for w in
                                                                       range(max(workers, 1))]  # fmt: skip
    assert stats["p99_wait_s"] >= stats["p50_wait_s"] >= 0
    stalls = [e for e in events if e["name"] == "stall"]
    name = "worker 1" if workers else "main process"  # chunk 3 is worker 1's with 2 workers, no shuffle
    assert any(e["args"]["worker"] == name and f"download {url}/{stalled}" in e["args"]["doing"] for e in stalls)
    assert sorted(indexes) == list(range(N))  # the retry after the stall delivers everything
    reports = [str(w.message) for w in caught if issubclass(w.category, LoaderStallWarning)]
    stuck = [line for line in reports[0].splitlines() if f"download {url}/{stalled}" in line]
    assert stuck, reports[0]
    assert stuck[0].startswith(f"  rank 0 {name} (pid "), reports[0]
    assert "LITDATA_WATCHDOG_S" in reports[0]
    assert loader._watchdog is not None and loader._watchdog.reports == len(reports)


def test_healthy_run_reports_nothing(url: str, s3_server: S3Server, proxy: FaultProxy, tmp_path: Path) -> None:
    loader = _loader(url, s3_server, proxy, tmp_path / "cache", num_workers=2, watchdog_s=60)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoaderStallWarning)
        assert sum(len(batch["index"]) for batch in loader) == N
    assert loader._watchdog is not None and loader._watchdog.reports == 0


def _slowly(sample: dict[str, object]) -> dict[str, object]:
    time.sleep(0.02)
    return sample


def test_a_stopped_worker_is_named_with_its_pid(tmp_path: Path) -> None:
    # A DataLoader worker SIGSTOPped mid-epoch delivers nothing: the report names it, its pid and
    # that it is stopped (before, it only showed "nothing in LitData" for that worker).
    local, samples = tmp_path / "local", 200
    writer = BinaryWriter(local, chunk_size=10)
    for i in range(samples):
        writer.add_item(i, {"index": i, "x": torch.full((8,), float(i))})
    writer.done()
    writer.merge()
    dataset = StreamingDataset(str(local), transform=_slowly)  # 2 s of work per worker
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=2, watchdog_s=1)
    assert loader._watchdog is not None
    board = loader._watchdog.board
    indexes: list[int] = []
    stopped = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LoaderStallWarning)
        for batch in loader:
            indexes.extend(int(i) for i in batch["index"])
            if len(indexes) == 10:  # a batch from each worker: both are attached
                stopped = board.pids()[1]
                os.kill(stopped, signal.SIGSTOP)
                threading.Timer(4.0, os.kill, (stopped, signal.SIGCONT)).start()
    assert stopped and sorted(indexes) == list(range(samples))
    reports = [str(w.message) for w in caught if issubclass(w.category, LoaderStallWarning)]
    named = [line for report in reports for line in report.splitlines() if f"pid {stopped}, stopped" in line]
    assert named and named[0].startswith("  rank 0 worker 1 (pid "), reports
    assert "no batch from it for " in named[0], named[0]
