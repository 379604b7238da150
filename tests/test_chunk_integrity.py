"""Per-chunk checksums end to end: a damaged cached chunk is fetched again, a damaged object fails
clearly, a local dataset can be verified on open, and datasets without checksums read as before.
S3 is a moto server on 127.0.0.1."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter, ChecksumError, DatasetReader, checksum_file, load_index
from litdata_io import ChunkDownloadError, get_storage
from litdata_stream import StreamingDataLoader, StreamingDataset
from tests.support.servers import S3Server

N = 40
FIXTURE = Path(__file__).parents[1] / "packages/litdata-format/tests/fixtures/upstream-0.2.76/dict_basic"


def _write(folder: Path, compression: str | None = None) -> Path:
    writer = BinaryWriter(folder, chunk_size=10, compression=compression)
    for i in range(N):
        writer.add_item(i, {"index": i, "x": torch.full((64,), float(i))})
    writer.done()
    writer.merge()
    return folder


def _upload(local: Path, server: S3Server, url: str) -> None:
    storage = get_storage(url, server.storage_options())
    for path in sorted(local.iterdir()):
        storage.upload(path, path.name)


def _values(dataset: StreamingDataset, workers: int = 0) -> dict[int, list[float]]:
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=workers)
    return {int(i): x.tolist() for batch in loader for i, x in zip(batch["index"], batch["x"])}


def _expected() -> dict[int, list[float]]:
    return {i: [float(i)] * 64 for i in range(N)}


def _flip(path: Path, position: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) - 3 if position is None else position] ^= 0x10  # inside the last sample's tensor
    path.write_bytes(bytes(data))


@pytest.mark.cloud
@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_cached_chunk_altered_on_disk_is_fetched_again(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, compression: str | None, workers: int
) -> None:
    url = f"s3://{s3_bucket}/data"
    _upload(_write(tmp_path / "local", compression), s3_server, url)
    cache = tmp_path / "cache"
    options = {"storage_options": s3_server.storage_options(), "cache_dir": str(cache)}
    assert _values(StreamingDataset(url, **options), workers) == _expected()
    [chunk] = cache.rglob("chunk-0-3.bin")  # kept decompressed, as a plain .bin, when compressed
    good = checksum_file(chunk)
    size = chunk.stat().st_size
    _flip(chunk)  # same size: only the bytes tell
    assert chunk.stat().st_size == size and checksum_file(chunk) != good

    # A new reader (a new process, for the workers) checks the cached file before using it.
    assert _values(StreamingDataset(url, **options), workers) == _expected()
    assert checksum_file(chunk) == good


@pytest.mark.cloud
def test_a_damaged_object_fails_naming_the_chunk_the_url_and_both_hashes(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    url = f"s3://{s3_bucket}/data"
    local = _write(tmp_path / "local")
    _upload(local, s3_server, url)
    info = load_index(local).chunks[2]
    _flip(local / info.filename)
    damaged = checksum_file(local / info.filename)
    get_storage(url, s3_server.storage_options()).upload(local / info.filename, info.filename)

    dataset = StreamingDataset(url, storage_options=s3_server.storage_options(), cache_dir=str(tmp_path / "cache"))
    assert dataset[5]["index"] == 5  # the undamaged chunks read
    with pytest.raises(ChunkDownloadError) as raised:
        dataset[25]
    message = str(raised.value)
    assert f"{url}/{info.filename}" in message and "downloaded twice" in message
    assert damaged in message and info.extra["checksum"] in message
    assert not list((tmp_path / "cache").rglob(info.filename))  # never published


def test_a_local_dataset_verified_on_open_catches_a_flipped_byte(tmp_path: Path) -> None:
    local = _write(tmp_path / "local")
    assert _values(StreamingDataset(local, verify_chunks=True)) == _expected()
    info = load_index(local).chunks[1]
    _flip(local / info.filename)
    assert _values(StreamingDataset(local)) != _expected()  # off by default for local data: read as stored
    with pytest.raises(ChecksumError, match=rf"chunk {info.filename} \({local}\).*{info.extra['checksum']}"):
        _values(StreamingDataset(local, verify_chunks=True))
    with pytest.raises(ChecksumError):
        _values(StreamingDataset(local, verify_chunks=True), workers=2)


def _rows(dataset: Any) -> list[tuple[Any, ...]]:
    return [tuple(sample.values()) for sample in dataset]


@pytest.mark.cloud
def test_datasets_without_checksums_read_as_before(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    assert all("checksum" not in info.extra for info in load_index(FIXTURE).chunks)
    want = _rows(DatasetReader(FIXTURE))
    with pytest.warns(UserWarning, match=r"verify_chunks=True: 2 of the 2 chunks .* record no checksum"):
        dataset = StreamingDataset(FIXTURE, verify_chunks=True)  # asked to verify: told it cannot
    assert _rows(dataset) == want
    url = f"s3://{s3_bucket}/upstream"
    _upload(FIXTURE, s3_server, url)
    options = {"storage_options": s3_server.storage_options(), "cache_dir": str(tmp_path / "cache")}
    assert _rows(StreamingDataset(url, **options)) == want
    assert _rows(StreamingDataset(url, **options)) == want  # from the cache left by the first reader


def _edit_entry(folder: Path, number: int, **changes: Any) -> None:
    index_file = folder / "index.json"
    index = json.loads(index_file.read_text())
    for key, value in changes.items():
        if value is None:
            index["chunks"][number].pop(key, None)
        else:
            index["chunks"][number][key] = value
    index_file.write_text(json.dumps(index))


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("checksum", "xxh3_64:not-hex-digits!", "not 'xxh3_64:' and 16 hex digits"),
        ("checksum", "xxh3_64:0123", "not 'xxh3_64:' and 16 hex digits"),
        ("checksum", 12345, "not 'xxh3_64:' and 16 hex digits"),
        ("checksum", "sha256:" + "ab" * 32, "of algorithm 'sha256', which this version cannot check"),
        ("plain_checksum", "crc32:deadbeef", "of algorithm 'crc32'"),
    ],
)
def test_verify_chunks_refuses_a_checksum_it_cannot_check(tmp_path: Path, field: str, value: Any, says: str) -> None:
    local = _write(tmp_path / "local")
    info = load_index(local).chunks[2]
    _edit_entry(local, 2, **{field: value})
    with pytest.raises(
        ValueError, match=rf"chunks\[2\] \({info.filename}\): '{field}' is .*{says}.*verify_chunks=False"
    ):
        StreamingDataset(local, verify_chunks=True)
    assert _values(StreamingDataset(local)) == _expected()  # not asked to verify: read as before


def test_verify_chunks_warns_once_naming_the_chunks_without_a_checksum(tmp_path: Path) -> None:
    local = _write(tmp_path / "local")
    names = [load_index(local).chunks[n].filename for n in (1, 3)]
    _edit_entry(local, 1, checksum=None)
    _edit_entry(local, 3, checksum=None)
    with pytest.warns(UserWarning, match="verify_chunks") as caught:
        dataset = StreamingDataset(local, verify_chunks=True)
    [warning] = [w for w in caught if "verify_chunks" in str(w.message)]
    message = str(warning.message)
    assert "2 of the 4 chunks" in message and all(name in message for name in names), message
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing more while reading, in the workers either
        assert _values(dataset, workers=2) == _expected()
    info = load_index(local).chunks[2]
    _flip(local / info.filename)
    with pytest.warns(UserWarning, match="verify_chunks"), pytest.raises(ChecksumError):
        _values(StreamingDataset(local, verify_chunks=True))  # the chunks that do record one are still checked


@pytest.mark.parametrize("change", ["appended", "cut-short"])
@pytest.mark.parametrize("reader", ["DatasetReader", "StreamingDataset"])
def test_a_local_chunk_of_another_size_than_its_index_says_is_refused(tmp_path: Path, change: str, reader: str) -> None:
    local = _write(tmp_path / "local")
    info = load_index(local).chunks[1]
    path = local / info.filename
    data = path.read_bytes()
    # Appended bytes leave every offset valid, and cutting the last 8 bytes leaves the header whole:
    # only the size tells (the samples of the other chunks still read).
    path.write_bytes(data + bytes(16) if change == "appended" else data[:-8])
    found = path.stat().st_size
    dataset: Any = DatasetReader(local) if reader == "DatasetReader" else StreamingDataset(local)
    assert dataset[0]["index"] == 0
    with pytest.raises(
        ValueError, match=rf"chunk {info.filename} at .* has {found} bytes but index.json says {info.chunk_bytes}"
    ):
        dataset[15]
