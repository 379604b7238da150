"""A remote index is read as a local one is: downloaded into the cache folder, then scanned from that
file window by window (never held whole in memory). It gives the index the local load gives, in
the cache version it always had (the digest of the URL and the bytes), leaves nothing else in the
cache folder, and a damaged one is refused naming its URL and is not cached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litdata_format import BinaryWriter, DatasetIndex, load_index
from litdata_io import dataset_version, get_storage
from litdata_stream import StreamingDataset
from litdata_stream._sources.remote import fetch_index
from tests.support.servers import S3Server


def _dataset(folder: Path, chunks: int | None = None) -> Path:
    """A small dataset of ints; with ``chunks``, its index lists that many entries of the writer's shape."""
    writer = BinaryWriter(folder, chunk_size=4)
    for i in range(10):
        writer.add_item(i, {"index": i})
    writer.done()
    writer.merge()
    if chunks is not None:  # an index past the scan's 4 MiB window, as the writer would write it
        obj = json.loads((folder / "index.json").read_text())
        first = obj["chunks"][0]
        obj["chunks"] = [{**first, "filename": f"chunk-0-{n}.bin", "chunk_bytes": 100 + n} for n in range(chunks)]
        (folder / "index.json").write_text(json.dumps(obj, sort_keys=True))
    return folder


def _upload(folder: Path, url: str, options: dict[str, str]) -> None:
    storage = get_storage(url, options)
    for path in sorted(folder.iterdir()):
        storage.upload(path, path.name)


def _same(found: DatasetIndex, expected: DatasetIndex) -> None:
    a, b = found.table, expected.table
    assert a.names == b.names and a.extra_columns == b.extra_columns
    assert (a.chunk_sizes.tolist(), a.chunk_bytes.tolist(), a.dims.tolist()) == (
        b.chunk_sizes.tolist(), b.chunk_bytes.tolist(), b.dims.tolist(),
    )  # fmt: skip
    assert (found.config, found.updated_at) == (expected.config, expected.updated_at)
    assert a.fingerprint() == b.fingerprint()


@pytest.mark.cloud
@pytest.mark.parametrize("chunks", [None, 60_000])
def test_a_downloaded_index_is_the_local_one(tmp_path: Path, s3_server: S3Server, s3_bucket: str,
                                             chunks: int | None) -> None:  # fmt: skip
    folder = _dataset(tmp_path / "local", chunks)
    url = f"s3://{s3_bucket}/data"
    # The big index (~6 MB) comes in parallel ranged parts of 1 MiB, as a 1M-chunk one does in 8 MiB parts.
    options = {**s3_server.storage_options(), "parallel_threshold": "1MiB", "part_size": "1MiB"}
    _upload(folder, url, options)
    cache = tmp_path / "cache"

    index, version, where = fetch_index(get_storage(url, options), cache, None)

    assert where == f"{url}/index.json" == index.source
    _same(index, load_index(folder))
    written = (folder / "index.json").read_bytes()
    assert version == dataset_version(url, written)  # the version caches were keyed on before
    assert sorted(p.name for p in cache.iterdir()) == [version]  # no download left beside it
    assert (cache / version / "index.json").read_bytes() == written
    _same(load_index(cache / version), index)  # the cached copy, as a later open finds it


@pytest.mark.cloud
def test_a_dataset_opened_from_the_bucket_records_the_local_fingerprint(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    folder = _dataset(tmp_path / "local")
    url = f"s3://{s3_bucket}/data"
    _upload(folder, url, s3_server.storage_options())
    local = StreamingDataset(str(folder))
    remote = StreamingDataset(url, cache_dir=str(tmp_path / "cache"), storage_options=s3_server.storage_options())
    assert len(remote) == len(local) == 10
    assert remote.state_dict()["dataset"] == local.state_dict()["dataset"]  # a state resumes on either copy
    assert [remote[i]["index"] for i in range(10)] == list(range(10))


@pytest.mark.cloud
def test_a_damaged_index_names_its_url_and_is_not_cached(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/data"
    storage = get_storage(url, s3_server.storage_options())
    storage.put("index.json", b'{"chunks": [{"chunk_bytes": 1')
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match=rf"^{url}/index.json: index.json is not valid JSON"):
        fetch_index(storage, cache, None)
    assert not cache.exists() or not any(cache.rglob("*"))
