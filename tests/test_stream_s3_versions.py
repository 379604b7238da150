"""The cache never serves another dataset's bytes: a dataset rewritten at its URL, two datasets
sharing one cache folder, a truncated cached chunk. Against an S3 server (moto) on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_io import ChunkDownloadError, Dir, clear_cache, get_storage
from litdata_stream import StreamingDataLoader, StreamingDataset
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

N = 40


def _write(tmp_path: Path, server: S3Server, url: str, offset: int) -> None:
    """Write (or rewrite) the dataset at ``url``: sample i holds ``i + offset``. Every version has
    the same chunk names and sizes, so only the values tell them apart."""
    local = tmp_path / f"local-{offset}-{url.rsplit('/', 1)[-1]}"
    writer = BinaryWriter(local, chunk_size=10)
    for i in range(N):
        writer.add_item(i, {"index": i, "x": torch.full((4,), float(i + offset))})
    writer.done()
    writer.merge()
    storage = get_storage(url, server.storage_options())
    for path in sorted(local.iterdir()):
        storage.upload(path, path.name)


def _values(dataset: StreamingDataset, workers: int = 0) -> dict[int, int]:
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=workers)
    return {int(i): int(x[0]) for batch in loader for i, x in zip(batch["index"], batch["x"])}


def _dataset(location: Any, server: S3Server, **options: Any) -> StreamingDataset:
    return StreamingDataset(location, storage_options=server.storage_options(), **options)


def _versions(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_rewritten_dataset_is_read_anew(tmp_path: Path, s3_server: S3Server, s3_bucket: str, workers: int) -> None:
    url = f"s3://{s3_bucket}/data"
    cache = tmp_path / "cache"
    _write(tmp_path, s3_server, url, offset=0)
    assert _values(_dataset(url, s3_server, cache_dir=str(cache)), workers) == {i: i for i in range(N)}
    [folder] = [p for p in cache.iterdir() if p.is_dir()]
    [old] = _versions(folder)

    _write(tmp_path, s3_server, url, offset=1000)
    fresh = _dataset(url, s3_server, cache_dir=str(cache))
    assert fresh[3]["x"][0] == 1003
    assert _values(fresh, workers) == {i: 1000 + i for i in range(N)}
    [new] = _versions(folder)
    assert new != old  # the superseded version's folder is gone, not left to fill the disk


def test_workers_read_the_version_their_dataset_opened(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/data"
    cache = tmp_path / "cache"
    _write(tmp_path, s3_server, url, offset=0)
    dataset = _dataset(url, s3_server, cache_dir=str(cache))
    assert _values(dataset, workers=2) == {i: i for i in range(N)}
    _write(tmp_path, s3_server, url, offset=1000)
    # Its index and chunks are in the cache: new workers read the version it opened.
    assert _values(dataset, workers=2) == {i: i for i in range(N)}
    clear_cache(cache)  # the index is gone too: a worker finds the URL changed and says so
    with pytest.raises(RuntimeError, match=r"index\.json changed since this dataset was opened"):
        _values(dataset, workers=1)
    assert _values(_dataset(url, s3_server, cache_dir=str(cache)), workers=2) == {i: 1000 + i for i in range(N)}


def test_two_datasets_sharing_a_dir_path_stay_apart(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    first, second = f"s3://{s3_bucket}/first", f"s3://{s3_bucket}/second"
    _write(tmp_path, s3_server, first, offset=0)
    _write(tmp_path, s3_server, second, offset=500)  # the same chunk names and sizes
    shared = str(tmp_path / "shared")
    a = _dataset(Dir(path=shared, url=first), s3_server)
    b = _dataset(Dir(path=shared, url=second), s3_server)
    want_a, want_b = {i: i for i in range(N)}, {i: 500 + i for i in range(N)}
    for _ in range(2):  # in turn: neither evicts nor reuses the other's chunks
        assert _values(a) == want_a
        assert _values(b, workers=2) == want_b
    assert len(_versions(Path(shared))) == 2

    # Side by side: both loaders' workers fetch into the folder at the same time.
    seen_a: dict[int, int] = {}
    seen_b: dict[int, int] = {}
    loaders = [StreamingDataLoader(d, batch_size=5, num_workers=2) for d in (a, b)]
    for batch_a, batch_b in zip(*loaders):
        seen_a.update((int(i), int(x[0])) for i, x in zip(batch_a["index"], batch_a["x"]))
        seen_b.update((int(i), int(x[0])) for i, x in zip(batch_b["index"], batch_b["x"]))
    assert (seen_a, seen_b) == (want_a, want_b)


def test_a_truncated_cached_chunk_is_fetched_again(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/data"
    cache = tmp_path / "cache"
    _write(tmp_path, s3_server, url, offset=0)
    assert _values(_dataset(url, s3_server, cache_dir=str(cache)), workers=2) == {i: i for i in range(N)}
    [chunk] = [p for p in cache.rglob("chunk-0-1.bin")]
    size = chunk.stat().st_size
    os.truncate(chunk, size // 2)

    assert _values(_dataset(url, s3_server, cache_dir=str(cache)), workers=2) == {i: i for i in range(N)}
    assert chunk.stat().st_size == size

    # The object itself is short now too: one more download, then an error naming everything.
    storage = get_storage(url, s3_server.storage_options())
    storage.put("chunk-0-1.bin", storage.get("chunk-0-1.bin")[:100])
    os.truncate(chunk, 7)
    dataset = _dataset(url, s3_server, cache_dir=str(cache))
    with pytest.raises(ChunkDownloadError) as raised:
        dataset[15]
    message = str(raised.value)
    assert f"{url}/chunk-0-1.bin" in message and "has 100 bytes" in message and f"says {size}" in message
