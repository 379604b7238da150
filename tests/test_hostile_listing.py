"""A raw dataset's shared listing (``index.json.zstd`` in the bucket) is data others can write.

Every path it names must be a file inside the dataset's prefix, so that joined to the cache folder it
stays inside it too. A listing naming ``<root>/../../<a local file>`` or ``<root>//<an absolute
path>`` is refused naming the listing and the entry: no local file is read as a sample, no object's
bytes are written outside the cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litdata_io import get_storage
from litdata_raw import FileMetadata, StreamingRawDataset
from litdata_raw._file_index import INDEX_FILENAME, encode_index
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud


def _dataset(server: S3Server, bucket: str, hostile: str) -> str:
    """A raw dataset of two files whose shared listing names a third, ``hostile`` (a path after the root)."""
    url = f"s3://{bucket}/raw"
    storage = get_storage(url, server.storage_options())
    files = []
    for i in range(2):
        data = json.dumps({"i": i}).encode()
        storage.put(f"{i}.json", data)
        files.append(FileMetadata(f"{url}/{i}.json", len(data)))
    files.append(FileMetadata(f"{url}/{hostile}", 11))
    storage.put(INDEX_FILENAME, encode_index(files, url))
    return url


@pytest.mark.parametrize("cache_files", [False, True])
def test_a_listing_naming_a_local_file_is_refused(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, cache_files: bool
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"local bytes")  # 11 bytes: the size the listing gives, as an attacker would
    hostile = "../" * 40 + str(secret).lstrip("/")
    url = _dataset(s3_server, s3_bucket, hostile)
    with pytest.raises(ValueError) as caught:
        dataset = StreamingRawDataset(
            url, cache_dir=tmp_path / "cache", storage_options=s3_server.storage_options(), cache_files=cache_files
        )
        [dataset[i] for i in range(len(dataset))]  # the old code served the secret here
    message = str(caught.value)
    assert f"{url}/{INDEX_FILENAME}" in message and "files[2]" in message and hostile in message, message
    assert "not a relative path inside the dataset" in message


def test_a_listing_naming_an_absolute_path_writes_nothing_outside(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    target = tmp_path / "outside" / "evil.txt"
    target.parent.mkdir()
    url = _dataset(s3_server, s3_bucket, "/" + str(target).lstrip("/"))
    # The object the entry names exists, so that a fetch of it would succeed.
    get_storage(url, s3_server.storage_options()).put(f"/{str(target).lstrip('/')}", b"evil bytes!")
    with pytest.raises(ValueError, match=r"files\[2\].*not a relative path inside the dataset"):
        dataset = StreamingRawDataset(
            url, cache_dir=tmp_path / "cache", storage_options=s3_server.storage_options(), cache_files=True
        )
        [dataset[i] for i in range(len(dataset))]
    assert not target.exists()


def test_a_cached_listing_is_checked_too(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    """The copy in a shared cache folder, and a local dataset's listing (only ever in the cache), alike."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(2):
        (data / f"{i}.txt").write_text(str(i))
    secret = tmp_path / "secret.txt"
    secret.write_text("local")
    cache = tmp_path / "cache"
    dataset = StreamingRawDataset(data, cache_dir=cache)
    assert sorted(dataset[i] for i in range(2)) == [b"0", b"1"]
    listing = Path(dataset.cache_dir) / INDEX_FILENAME
    hostile = [*dataset.files, FileMetadata(f"{data}/../secret.txt", 5)]
    listing.write_bytes(encode_index(hostile, str(data)))
    with pytest.raises(ValueError, match=rf"{listing}: files\[2\] \({data}/../secret.txt\)"):
        StreamingRawDataset(data, cache_dir=cache)


def test_hidden_files_and_dots_inside_names_still_read(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/raw"
    storage = get_storage(url, s3_server.storage_options())
    keys = ["a/.keep", "..b", "c../d.json", ".hidden/e"]
    for key in keys:
        storage.put(key, key.encode())
    dataset = StreamingRawDataset(url, cache_dir=tmp_path / "cache", storage_options=s3_server.storage_options())
    assert sorted(dataset[i] for i in range(len(dataset))) == sorted(k.encode() for k in keys)
    again = StreamingRawDataset(
        url, cache_dir=tmp_path / "other", storage_options=s3_server.storage_options(), cache_files=True
    )  # from the shared listing, through the cache
    assert sorted(again[i] for i in range(len(again))) == sorted(k.encode() for k in keys)
