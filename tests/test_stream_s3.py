"""StreamingDataset over an S3-compatible server: chunks through the cache, workers, resume, the cap."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_io import get_storage
from litdata_stream import StreamingDataLoader, StreamingDataset
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud


def _upload_dataset(tmp_path: Path, server: S3Server, bucket: str, n: int = 120, **options: Any) -> str:
    local = tmp_path / "local"
    writer = BinaryWriter(local, chunk_size=10, **options)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.full((16,), float(i))})
    writer.done()
    writer.merge()
    url = f"s3://{bucket}/data"
    storage = get_storage(url, server.storage_options())
    for path in sorted(local.iterdir()):
        storage.upload(path, path.name)
    return url


def _cached_bytes(root: Path) -> int:
    """Bytes of published chunks under ``root`` (files and staging folders come and go while we
    look: os.walk skips a folder that vanished, and a vanished file counts nothing)."""
    total = 0
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]  # downloads still being staged
        for name in names:
            if name.startswith("chunk-"):
                with contextlib.suppress(FileNotFoundError):
                    total += os.stat(os.path.join(folder, name)).st_size
    return total


def _indexes(batches: list[Any]) -> list[int]:
    return [int(i) for batch in batches for i in batch["index"]]


def _folder_bytes(root: Path) -> int:
    """Bytes of every file under ``root``, hidden ones and downloads being staged included."""
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(folder, name)).st_size
    return total


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_stream_from_s3_with_workers(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, compression: str | None
) -> None:
    url = _upload_dataset(tmp_path, s3_server, s3_bucket, compression=compression)
    ds = StreamingDataset(
        url, cache_dir=str(tmp_path / "cache"), storage_options=s3_server.storage_options(), shuffle=True
    )
    assert len(ds) == 120
    assert ds[57]["index"] == 57
    loader = StreamingDataLoader(ds, batch_size=8, num_workers=2)
    assert sorted(_indexes(list(loader))) == list(range(120))
    cached = [p.name for p in (tmp_path / "cache").rglob("chunk-*")]
    assert cached and not any(name.endswith(".zstd.bin") for name in cached)


def test_resume_from_s3(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = _upload_dataset(tmp_path, s3_server, s3_bucket)

    def make(workers: int) -> StreamingDataLoader:
        ds = StreamingDataset(
            url, cache_dir=str(tmp_path / "cache"), storage_options=s3_server.storage_options(), shuffle=True
        )
        return StreamingDataLoader(ds, batch_size=6, num_workers=workers)

    full = _indexes(list(make(2)))
    loader = make(2)
    seen = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 4:
            break
    state = loader.state_dict()
    resumed = make(2)
    resumed.load_state_dict(state)
    assert _indexes(seen) + _indexes(list(resumed)) == full


def test_cache_stays_under_the_cap(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = _upload_dataset(tmp_path, s3_server, s3_bucket, n=300)
    chunk_bytes = max(p.stat().st_size for p in (tmp_path / "local").glob("chunk-*"))
    cap = chunk_bytes * 4
    ds = StreamingDataset(
        url, cache_dir=str(tmp_path / "cache"), storage_options=s3_server.storage_options(), max_cache_size=cap
    )
    peak = 0
    for i, sample in enumerate(StreamingDataLoader(ds, batch_size=5, num_workers=1)):
        if i % 3 == 0:
            peak = max(peak, _cached_bytes(tmp_path / "cache"))
        assert len(sample["index"]) == 5
    # in use (one per worker and the prefetch window) may exceed the cap briefly; never the whole dataset
    assert peak <= cap + 3 * chunk_bytes


def test_the_whole_cache_folder_stays_under_the_cap_index_included(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    # 200 chunks of ~1 KB: the dataset's index.json (kept in the cache folder) weighs ~30 chunks.
    url = _upload_dataset(tmp_path, s3_server, s3_bucket, n=2000)
    local = tmp_path / "local"
    chunk_bytes = max(p.stat().st_size for p in local.glob("chunk-*"))
    cap = (local / "index.json").stat().st_size + 30 * chunk_bytes
    cache = tmp_path / "cache"
    ds = StreamingDataset(
        url, cache_dir=str(cache), storage_options=s3_server.storage_options(), max_cache_size=cap, shuffle=True
    )
    peak, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _folder_bytes(cache))
            done.wait(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        seen = [int(i) for batch in StreamingDataLoader(ds, batch_size=20, num_workers=2) for i in batch["index"]]
    finally:
        done.set()
        sampler.join()
    assert sorted(seen) == list(range(2000))
    assert peak > cap // 2  # the sampler saw the cache at work
    # The folder as a whole (index, chunks, downloads in flight, the cache's hidden bookkeeping) never
    # holds more than the cap and one chunk per worker: the index's bytes are taken from the chunks' share.
    assert peak <= cap + 2 * chunk_bytes
