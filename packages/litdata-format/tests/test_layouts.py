"""The 0.2.76 chunk layouts read here: framed zstd, per-item zstd and Arrow rows.

The golden folders under ``fixtures/upstream-0.2.76`` were written by the real upstream
``optimize``; the samples it was given come from ``fixtures/samples.py``. Corruption and
layout variants upstream no longer writes are built here byte by byte.
"""

from __future__ import annotations

import importlib.util
import shutil
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pytest
import zstandard

from litdata_format import DatasetReader, load_index
from litdata_format._chunks._arrow_rows import ArrowRowsChunk, is_arrow_rows_chunk
from litdata_format._chunks._chunk import ARROW_ROWS_MAGIC, FRAMED_MAGIC
from litdata_format._chunks._encryption import FernetEncryption
from litdata_format._chunks._framed import FramedChunk, SampleZstdChunk, inflate_zstd
from litdata_format.internal import encode_chunk

FIXTURES = Path(__file__).parent / "fixtures"
UPSTREAM = FIXTURES / "upstream-0.2.76"


def _load_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("litdata_layout_samples", FIXTURES / "samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_samples()


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, np.ndarray):
        return (
            isinstance(actual, np.ndarray)
            and actual.dtype == expected.dtype
            and actual.shape == expected.shape
            and np.array_equal(actual, expected)
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and list(actual) == list(expected)
            and all(_same(actual[k], expected[k]) for k in expected)
        )
    if isinstance(expected, (list, tuple)):
        return (
            type(actual) is type(expected)
            and len(actual) == len(expected)
            and all(_same(a, e) for a, e in zip(actual, expected))
        )
    return type(actual) is type(expected) and actual == expected


def _read_all(name: str, **kwargs: Any) -> list[Any]:
    reader = DatasetReader(UPSTREAM / name, **kwargs)
    try:
        return [reader[i] for i in range(len(reader))]
    finally:
        reader.close()


def _check_fixture(name: str, **kwargs: Any) -> None:
    meta = samples.FIXTURES[name]
    got = _read_all(name, **kwargs)
    assert len(got) == meta["num_samples"]
    for i, value in enumerate(got):
        expected = samples.generate(name, i)
        assert _same(value, expected), (name, i, value, expected)


# -- framed zstd (compression_level="batch") -------------------------------------------------


@pytest.mark.parametrize("name", ["zstd_framed", "zstd_framed_default"])
def test_upstream_framed_fixture_reads(name: str) -> None:
    index = load_index(UPSTREAM / name)
    assert index.config["compression_level"] == "batch"
    for info in index.chunks:
        data = (UPSTREAM / name / info.filename).read_bytes()
        assert data.startswith(FRAMED_MAGIC)
        assert len(data) == info.chunk_bytes  # the index counts the framed file's own size
    _check_fixture(name)


def test_upstream_framed_fixture_frames_follow_batch_size() -> None:
    index = load_index(UPSTREAM / "zstd_framed")
    batch = index.config["compression_batch_size"]
    path = UPSTREAM / "zstd_framed" / index.chunks[0].filename
    chunk = FramedChunk(path.read_bytes(), str(path))
    assert len(chunk) == index.chunks[0].chunk_size
    assert [frame[1] for frame in chunk._frames][:-1] == [batch] * (len(chunk._frames) - 1)
    # the payload is the classic item bytes back to back
    assert bytes(chunk.payload()) == b"".join(bytes(chunk.item(i)) for i in range(len(chunk)))


def _pack_framed(items: list[bytes], per_frame: int, content_size: bool = True, version: int = 1) -> bytes:
    """A framed chunk built from the layout description (as a test oracle, not upstream's code)."""
    count = len(items)
    offsets = [0]
    for item in items:
        offsets.append(offsets[-1] + len(item))
    groups = [items[i : i + per_frame] for i in range(0, count, per_frame)]
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=content_size)
    blobs = [compressor.compress(b"".join(group)) for group in groups]
    table_start = 24 + 4 * (count + 1)
    position = table_start + 24 * len(groups)
    table = b""
    for k, (group, blob) in enumerate(zip(groups, blobs)):
        plain = sum(len(item) for item in group)
        table += struct.pack("<IIQII", k * per_frame, len(group), position, len(blob), plain)
        position += len(blob)
    prefix = struct.pack("<8sHHIII", FRAMED_MAGIC, version, 0, count, per_frame, len(groups))
    return prefix + struct.pack(f"<{count + 1}I", *offsets) + table + b"".join(blobs)


ITEMS = [bytes([i]) * (i * 3 % 11) + f"item-{i}".encode() for i in range(23)]


@pytest.mark.parametrize("content_size", [True, False])
def test_framed_chunk_items(content_size: bool) -> None:
    chunk = FramedChunk(_pack_framed(ITEMS, 5, content_size), "synthetic.bin")
    assert len(chunk) == len(ITEMS)
    assert [bytes(chunk.item(i)) for i in range(len(ITEMS))] == ITEMS
    assert [bytes(chunk.item(i)) for i in reversed(range(len(ITEMS)))] == ITEMS[::-1]
    assert bytes(chunk.payload()) == b"".join(ITEMS)
    with pytest.raises(IndexError, match="synthetic.bin"):
        chunk.item(len(ITEMS))


def test_framed_chunk_keeps_the_last_frame() -> None:
    chunk = FramedChunk(_pack_framed(ITEMS, 5), "synthetic.bin")
    first = chunk.item(0).obj
    assert chunk.item(4).obj is first  # same frame: not inflated again
    assert chunk.item(5).obj is not first


def _corrupt_cases() -> dict[str, tuple[bytes, str]]:
    good = _pack_framed(ITEMS, 5)
    table = 24 + 4 * (len(ITEMS) + 1)
    wrong_offsets = bytearray(good)
    struct.pack_into("<I", wrong_offsets, 24 + 4 * 3, 10**6)
    bad_frame = bytearray(good)
    struct.pack_into("<Q", bad_frame, table + 24 + 8, 10**9)  # frame 1 points past the file
    bad_rows = bytearray(good)
    struct.pack_into("<I", bad_rows, table + 4, 4)  # frame 0 claims 4 items instead of 5
    flipped = bytearray(good)
    flipped[-3] ^= 0xFF  # damage the last frame's compressed bytes
    return {
        "truncated header": (good[:20], "LDFZ01"),
        "truncated table": (good[: table + 10], "truncated"),
        "truncated frames": (good[:-7], "truncated"),
        "version": (_pack_framed(ITEMS, 5, version=2), "version 2"),
        "offsets": (bytes(wrong_offsets), "offsets"),
        "frame position": (bytes(bad_frame), "frame 1"),
        "frame items": (bytes(bad_rows), "frame"),
        "flipped byte": (bytes(flipped), "frame 4"),
    }


@pytest.mark.parametrize("case", sorted(_corrupt_cases()))
def test_corrupt_framed_chunk_names_the_file(case: str) -> None:
    data, message = _corrupt_cases()[case]
    with pytest.raises(ValueError, match=message) as caught:
        chunk = FramedChunk(data, "chunk-0-7.bin")
        for i in range(len(chunk)):
            chunk.item(i)
    assert "chunk-0-7.bin" in str(caught.value)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_upstream_framed_chunk_through_the_reader(tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "ds"
    shutil.copytree(UPSTREAM / "zstd_framed", folder)
    target = folder / load_index(folder).chunks[1].filename
    data = bytearray(target.read_bytes())
    if damage == "truncate":
        del data[-10:]
    else:
        data[-5] ^= 0x5A
    target.write_bytes(bytes(data))
    reader = DatasetReader(folder)
    first_chunk = load_index(folder).chunks[0].chunk_size
    assert _same(reader[0], samples.zstd_sample(0))  # the intact chunk still reads
    with pytest.raises(ValueError, match=target.name):
        reader[first_chunk]
    reader.close()


def test_inflate_zstd_rejects_truncated_and_foreign_bytes() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(b"abc" * 100)
    assert inflate_zstd(frame, "x") == b"abc" * 100
    with pytest.raises(ValueError, match="truncated"):
        inflate_zstd(frame[:-4], "here")
    with pytest.raises(ValueError, match="here: zstd decompression failed"):
        inflate_zstd(b"not zstd at all", "here")
    with pytest.raises(ValueError, match="more than 7 bytes but the frame table declares 7"):
        inflate_zstd(frame, "here", expected_size=7)


# -- per-item zstd (compression_level="sample") ----------------------------------------------


def test_upstream_sample_level_fixture_reads() -> None:
    name = "zstd_sample_level"
    index = load_index(UPSTREAM / name)
    assert index.config["compression_level"] == "sample"
    reader = DatasetReader(UPSTREAM / name)
    position = 0
    for info in index.chunks:
        chunk = SampleZstdChunk.open(UPSTREAM / name / info.filename)
        assert len(chunk) == info.chunk_size
        for i in range(len(chunk)):
            assert bytes(chunk.raw()[chunk._offsets[i] : chunk._offsets[i] + 4]) == b"\x28\xb5\x2f\xfd"
            assert _same(reader.item_loader.load(chunk, i), samples.zstd_sample(position))
            position += 1
        chunk.close()
    reader.close()
    assert position == samples.FIXTURES[name]["num_samples"]


def test_sample_level_chunk_passes_unwrapped_items_through() -> None:
    frame = zstandard.ZstdCompressor().compress(b"squeezed" * 10)
    chunk = SampleZstdChunk(encode_chunk([b"\x01\x00\x00\x00x", frame, b""]), "mixed.bin")
    assert [bytes(chunk.item(i)) for i in range(3)] == [b"\x01\x00\x00\x00x", b"squeezed" * 10, b""]
    assert bytes(chunk.payload()) == b"\x01\x00\x00\x00x" + b"squeezed" * 10
    broken = SampleZstdChunk(encode_chunk([frame[:-3]]), "broken.bin")
    with pytest.raises(ValueError, match="broken.bin, item 0"):
        broken.item(0)


def test_upstream_quirk_unframed_chunks_read_as_classic() -> None:
    # upstream 0.2.76 records compression="zstd"/"batch" but writes tuple samples unframed
    name = "quirk_tuple_zstd_unframed"
    index = load_index(UPSTREAM / name)
    assert index.config["compression_level"] == "batch"
    assert not (UPSTREAM / name / index.chunks[0].filename).read_bytes().startswith(FRAMED_MAGIC)
    _check_fixture(name)


# -- Arrow rows ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["json_rows", "json_rows_zstd", "dict_basic"])
def test_upstream_arrow_rows_fixture_reads(name: str) -> None:
    index = load_index(UPSTREAM / name)
    for info in index.chunks:
        data = (UPSTREAM / name / info.filename).read_bytes()
        assert data.endswith(ARROW_ROWS_MAGIC)
        chunk = ArrowRowsChunk(data, info.filename)
        assert len(chunk) == info.chunk_size
        assert not chunk.has_items  # 0.2.76 keeps the rows only in the Arrow table
        assert len(chunk.payload()) == 0
    _check_fixture(name)


def test_upstream_arrow_rows_ipc_compression_is_recorded() -> None:
    assert load_index(UPSTREAM / "json_rows_zstd").config["ipc_compression"] == "zstd"
    assert load_index(UPSTREAM / "json_rows").config["ipc_compression"] is None
    assert load_index(UPSTREAM / "json_rows_zstd").config["compression"] is None


def test_upstream_quirk_sample_encrypted_rows_are_plaintext() -> None:
    # upstream 0.2.76 encrypts each item, then drops the items and keeps the rows unencrypted
    name = "quirk_fernet_sample_arrow_plaintext"
    key = FernetEncryption.load(UPSTREAM / name / samples.FIXTURES[name]["key_file"], "litdata-test")
    index = load_index(UPSTREAM / name)
    assert index.encryption == {"algorithm": "fernet", "level": "sample"}
    raw = (UPSTREAM / name / index.chunks[0].filename).read_bytes()
    assert samples.dict_basic_sample(0)["name"].encode() in raw
    _check_fixture(name, encryption=key)


def _rows_table(rows: list[dict[str, Any]]) -> Any:
    return pa.Table.from_pylist(rows)


def _ipc_file(table: Any, batch_rows: int, compression: str | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_file(sink, table.schema, options=options) as writer:
        for start in range(0, table.num_rows, batch_rows):
            writer.write_table(table.slice(start, batch_rows))
    return sink.getvalue().to_pybytes()


def _ipc_stream(table: Any) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=3)
    return sink.getvalue().to_pybytes()


def _rows_chunk(head: bytes, ipc: bytes) -> bytes:
    return head + ipc + struct.pack("<I", len(ipc)) + ARROW_ROWS_MAGIC


ROWS = [{"id": i, "text": f"r{i}", "tags": ["a"] * (i % 3), "meta": {"k": i, "v": None}} for i in range(11)]


def _slim_head(count: int) -> bytes:
    return encode_chunk([b""] * count)


@pytest.mark.parametrize("layout", ["file", "file-zstd", "file-uneven", "stream"])
def test_arrow_rows_variants(layout: str) -> None:
    table = _rows_table(ROWS)
    if layout == "stream":
        ipc = _ipc_stream(table)
    elif layout == "file-uneven":
        ipc = _ipc_file(table, batch_rows=4)
    else:
        ipc = _ipc_file(table, batch_rows=256, compression="zstd" if layout == "file-zstd" else None)
    chunk = ArrowRowsChunk(_rows_chunk(_slim_head(len(ROWS)), ipc), "rows.bin")
    assert [chunk.sample(i) for i in range(len(ROWS))] == ROWS
    assert [chunk.sample(i) for i in reversed(range(len(ROWS)))] == ROWS[::-1]
    with pytest.raises(ValueError, match="rows.bin: stores its samples only as Arrow rows"):
        chunk.item(0)
    with pytest.raises(IndexError, match="rows.bin"):
        chunk.sample(len(ROWS))


def test_arrow_rows_with_a_pytree_body_keep_their_items() -> None:
    items = [f"item {i}".encode() for i in range(len(ROWS))]
    chunk = ArrowRowsChunk(_rows_chunk(encode_chunk(items), _ipc_file(_rows_table(ROWS), 256)), "old.bin")
    assert chunk.has_items
    assert [bytes(chunk.item(i)) for i in range(len(ROWS))] == items
    assert bytes(chunk.payload()) == b"".join(items)
    assert chunk.sample(3) == ROWS[3]


def test_arrow_rows_are_not_shared_between_reads() -> None:
    chunk = ArrowRowsChunk(_rows_chunk(_slim_head(len(ROWS)), _ipc_file(_rows_table(ROWS), 256)), "rows.bin")
    first = chunk.sample(2)
    first["tags"].append("mutated")
    first["id"] = -1
    assert chunk.sample(2) == ROWS[2]
    assert chunk.sample(2) is not chunk.sample(2)


def test_corrupt_arrow_rows_chunks_name_the_file() -> None:
    ipc = _ipc_file(_rows_table(ROWS), 256)
    good = _rows_chunk(_slim_head(len(ROWS)), ipc)
    with pytest.raises(ValueError, match="rows.bin: the Arrow trailer"):
        ArrowRowsChunk(good[:-12] + struct.pack("<I", 10**6) + ARROW_ROWS_MAGIC, "rows.bin")
    with pytest.raises(ValueError, match="rows.bin: not an Arrow rows chunk"):
        ArrowRowsChunk(good[:-1], "rows.bin")
    miscounted = _rows_chunk(_slim_head(len(ROWS) + 1), ipc)
    with pytest.raises(ValueError, match="rows.bin: the Arrow table holds 11 rows but the header says 12"):
        ArrowRowsChunk(miscounted, "rows.bin").sample(0)
    garbled = bytearray(good)
    start = len(_slim_head(len(ROWS)))
    end = start + len(ipc)
    garbled[end - 10 : end - 6] = b"\xff\xff\x00\x00"  # the IPC footer's length
    with pytest.raises(ValueError, match="rows.bin: the Arrow rows table cannot be read"):
        ArrowRowsChunk(bytes(garbled), "rows.bin").sample(0)


def test_arrow_rows_detection_is_exact() -> None:
    good = _rows_chunk(_slim_head(len(ROWS)), _ipc_file(_rows_table(ROWS), 256))
    assert is_arrow_rows_chunk(good)
    # a classic chunk whose last item happens to end with the magic is not taken for Arrow rows
    lookalike = encode_chunk([b"abc", b"xyz" + struct.pack("<I", 3) + ARROW_ROWS_MAGIC])
    assert not is_arrow_rows_chunk(lookalike)
    assert not is_arrow_rows_chunk(encode_chunk([b"abc"]))
    assert not is_arrow_rows_chunk(b"LDARW01\x00")
