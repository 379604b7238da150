"""StreamingRawDataset over an S3-compatible server: workers, the shared remote index, errors."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import DataLoader

from litdata_io import StorageError, get_storage
from litdata_io.internal import run_sync
from litdata_raw import FileIndexer, StreamingRawDataset
from litdata_raw import _file_index as _index
from litdata_raw._file_index import INDEX_FILENAME, decode_index
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

N = 24


def _upload(server: S3Server, bucket: str) -> str:
    url = f"s3://{bucket}/files"
    storage = get_storage(url, server.storage_options())
    for i in range(N):
        folder = "train" if i % 2 else "val"
        storage.put(f"{folder}/{i:03d}.jsonl", json.dumps({"i": i}).encode() + b"\n")
    return url


def _number(data: bytes) -> int:
    return json.loads(data)["i"]


def test_dataloader_with_two_workers(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = _upload(s3_server, s3_bucket)
    ds = StreamingRawDataset(url, cache_dir=tmp_path / "cache", storage_options=s3_server.storage_options())
    assert len(ds) == N
    assert all(f.path.startswith(url + "/") for f in ds.files)
    assert _number(ds[0]) in range(N)  # the parent reads before the workers fork
    loader = DataLoader(ds, batch_size=5, num_workers=2, collate_fn=lambda batch: [_number(b) for b in batch])
    seen = [i for batch in loader for i in batch]
    assert seen == [_number(ds[k]) for k in range(N)]
    assert sorted(seen) == list(range(N))


def test_remote_index_is_shared_and_reused(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = _upload(s3_server, s3_bucket)
    options = s3_server.storage_options()
    first = StreamingRawDataset(url, cache_dir=tmp_path / "machine-a", storage_options=options)
    storage = get_storage(url, options)
    assert decode_index(storage.get(INDEX_FILENAME), "remote") == first.files

    storage.delete("val/000.jsonl")
    # Another machine (empty cache) takes the remote index instead of listing the bucket again.
    other = StreamingRawDataset(url, cache_dir=tmp_path / "machine-b", storage_options=options)
    assert other.files == first.files
    assert (Path(other.cache_dir) / INDEX_FILENAME).is_file()
    gone = next(k for k, f in enumerate(other.files) if f.path.endswith("val/000.jsonl"))
    with pytest.raises(FileNotFoundError, match="recompute_index=True"):
        other[gone]
    fresh = StreamingRawDataset(url, cache_dir=tmp_path / "machine-b", storage_options=options, recompute_index=True)
    assert len(fresh) == N - 1
    assert len(decode_index(storage.get(INDEX_FILENAME), "remote")) == N - 1


def test_cache_files_and_paths(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = _upload(s3_server, s3_bucket)
    ds = StreamingRawDataset(
        url,
        cache_dir=tmp_path / "cache",
        storage_options=s3_server.storage_options(),
        cache_files=True,
        item_type="path",
    )
    paths = ds.__getitems__([3, 1, 2])
    assert [Path(p).read_bytes() for p in paths] == [
        get_storage(url, s3_server.storage_options()).get(ds.files[k].path[len(url) + 1 :]) for k in (3, 1, 2)
    ]
    assert all(p.startswith(ds.cache_dir) for p in paths)


def _refuses_seven(data: bytes) -> int:
    if _number(data) == 7:
        raise ValueError("seven is refused")
    return _number(data)


def test_transform_error_keeps_its_type_and_names_the_file(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = _upload(s3_server, s3_bucket)
    ds = StreamingRawDataset(
        url, cache_dir=tmp_path / "cache", storage_options=s3_server.storage_options(), transform=_refuses_seven
    )
    index = next(i for i, f in enumerate(ds.files) if f.path.endswith("/007.jsonl"))
    with pytest.raises(ValueError, match=rf"^seven is refused\ntransform failed on sample {index} \(.*/007\.jsonl\)$"):
        ds.__getitems__([0, index])


def test_unreachable_bucket_fails_clearly(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    options = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "aws_access_key_id": "k",
        "aws_secret_access_key": "s",
        "region_name": "us-east-1",
        "max_retries": 1,
        "backoff_base": 0.01,
        "backoff_max": 0.02,
        "timeout": 1.0,
    }
    with pytest.raises(StorageError, match=r"LIST s3://nowhere/files failed after 2 attempts.*max_retries=1"):
        StreamingRawDataset("s3://nowhere/files", cache_dir=tmp_path / "cache", storage_options=options)


def test_a_listing_made_again_elsewhere_replaces_the_local_copy(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    url = _upload(s3_server, s3_bucket)
    options = s3_server.storage_options()
    assert len(StreamingRawDataset(url, cache_dir=tmp_path / "machine-a", storage_options=options)) == N
    storage = get_storage(url, options)
    storage.delete("val/000.jsonl")
    fresh = StreamingRawDataset(url, cache_dir=tmp_path / "machine-b", storage_options=options, recompute_index=True)
    assert len(fresh) == N - 1
    # Machine A's cached listing is not the remote one any more: it takes the new one.
    again = StreamingRawDataset(url, cache_dir=tmp_path / "machine-a", storage_options=options)
    assert again.files == fresh.files


def test_cached_files_follow_the_listing(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = _upload(s3_server, s3_bucket)
    options = s3_server.storage_options()

    def open_dataset(**extra: Any) -> StreamingRawDataset:
        return StreamingRawDataset(url, cache_dir=tmp_path / "cache", storage_options=options, cache_files=True,
                                   item_type="path", **extra)  # fmt: skip

    first = open_dataset()
    old = Path(first[3])
    key = first.files[3].path[len(url) + 1 :]
    before = old.read_bytes()
    after = before.replace(b'"i"', b'"j"')
    assert len(after) == len(before)  # rewritten in place, same size: a size check cannot tell
    get_storage(url, options).put(key, after)
    assert Path(open_dataset()[3]).read_bytes() == before  # the same listing: its cached files
    fresh = open_dataset(recompute_index=True)  # the user says the data changed
    assert Path(fresh[3]).read_bytes() == after
    assert not old.exists()  # the previous listing's files are cleared


def test_a_big_prefix_is_listed_in_pages(
    tmp_path: Path,
    s3_server: S3Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    count, page = 1000, 90
    url = f"s3://{s3_bucket}/many"
    storage = get_storage(url, s3_server.storage_options())

    async def upload() -> None:
        for first in range(0, count, 200):  # a few hundred requests in flight, not two thousand
            await asyncio.gather(
                *(storage.aput(f"d{i % 3}/{i:05d}.bin", b"x" * (i % 5)) for i in range(first, first + 200))
            )

    run_sync(upload())
    storage.put("other/skip.txt", b"")  # outside the extensions filter
    monkeypatch.setattr(_index, "_PAGE_SIZE", page)
    monkeypatch.setattr(_index, "_PROGRESS_EVERY", 0.0)  # a line per page: one per listing request
    with caplog.at_level(logging.INFO, logger="litdata_raw"):
        ds = StreamingRawDataset(
            url,
            cache_dir=tmp_path / "cache",
            storage_options=s3_server.storage_options(),
            indexer=FileIndexer(extensions=[".bin"]),
        )
    expected = sorted((f"{url}/d{i % 3}/{i:05d}.bin", i % 5) for i in range(count))
    assert [(f.path, f.size) for f in ds.files] == expected
    lines = [r.getMessage() for r in caplog.records if r.name == "litdata_raw"]
    pages = -(-(count + 1) // page)
    assert sum("so far" in line for line in lines) == pages
    assert f"listed {page:,} files of {url} so far" in lines[0]
    assert any(f"indexed {count:,} files of {url}" in line for line in lines)
    # Each page is its own stateless request: the cursor is the last key of the page.
    first_page, cursor = run_sync(storage.alist_page("", "", page))
    assert len(first_page) == page and cursor == first_page[-1].key
