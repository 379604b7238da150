"""Dicts of JSON-like values are written as upstream 0.2.76's Arrow rows (``LDARW01``).

The chunks are compared with the ones upstream wrote for the same samples (the golden fixtures
``json_rows``, ``json_rows_zstd`` and ``dict_basic``): the same header, the same Arrow schema and
rows in batches of 256, the same index fields. Upstream reading them is tested in
``tests/test_compat_write_upstream_reads.py``.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pytest

from litdata_format import (
    BinaryWriter,
    DatasetReader,
    FernetEncryption,
    JsonLeaf,
    Serializer,
    complete_dataset,
    load_index,
)
from litdata_format._chunks._chunk import ARROW_ROWS_MAGIC

FIXTURES = Path(__file__).parent / "fixtures"
UPSTREAM = FIXTURES / "upstream-0.2.76"


def _load_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("litdata_arrow_write_samples", FIXTURES / "samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_samples()


def _write(path: Path, rows: list[Any], **options: Any) -> list[Any]:
    writer = BinaryWriter(path, **options)
    for i, row in enumerate(rows):
        writer.add_item(i, row)
    writer.done()
    writer.merge()
    reader = DatasetReader(path)
    try:
        return [reader[i] for i in range(len(reader))]
    finally:
        reader.close()


def _split(data: bytes) -> tuple[bytes, bytes]:
    """A chunk's header (count and offsets) and its Arrow IPC file."""
    assert data.endswith(ARROW_ROWS_MAGIC)
    (ipc_len,) = struct.unpack_from("<I", data, len(data) - 12)
    (count,) = struct.unpack_from("<I", data, 0)
    head_end = 4 * (count + 2)
    assert len(data) == head_end + ipc_len + 12
    return data[:head_end], data[head_end : head_end + ipc_len]


def _batches(ipc: bytes) -> list[Any]:
    reader = pa.ipc.open_file(pa.py_buffer(ipc))
    return [reader.get_batch(k) for k in range(reader.num_record_batches)]


@pytest.mark.parametrize(("fixture", "make"), [("json_rows", "json_row_sample"), ("json_rows_zstd", "json_row_sample"),
                                               ("dict_basic", "dict_basic_sample")])  # fmt: skip
def test_chunks_match_what_upstream_wrote(tmp_path: Path, fixture: str, make: str) -> None:
    meta = samples.FIXTURES[fixture]
    rows = [getattr(samples, make)(i) for i in range(meta["num_samples"])]
    got = _write(tmp_path / "ds", rows, **meta["optimize_kwargs"])
    ours, theirs = load_index(tmp_path / "ds"), load_index(UPSTREAM / fixture)
    assert [c.filename for c in ours.chunks] == [c.filename for c in theirs.chunks]
    assert [c.chunk_size for c in ours.chunks] == [c.chunk_size for c in theirs.chunks]
    for key in ("compression", "compression_level", "compression_batch_size", "ipc_compression", "item_loader"):
        assert ours.config.get(key) == theirs.config.get(key), key
    for info in ours.chunks:
        our_head, our_ipc = _split((tmp_path / "ds" / info.filename).read_bytes())
        their_head, their_ipc = _split((UPSTREAM / fixture / info.filename).read_bytes())
        assert our_head == their_head  # every offset is the header size: no item bytes
        ours_b, theirs_b = _batches(our_ipc), _batches(their_ipc)
        assert [b.num_rows for b in ours_b] == [b.num_rows for b in theirs_b]
        for a, b in zip(ours_b, theirs_b):
            assert a.schema.equals(b.schema) and a.equals(b)
        assert info.chunk_bytes == (tmp_path / "ds" / info.filename).stat().st_size
    upstream_rows = DatasetReader(UPSTREAM / fixture)
    assert got == [upstream_rows[i] for i in range(len(upstream_rows))]


def _varying(i: int) -> dict[str, Any]:
    row: dict[str, Any] = {"id": i, "tags": ["t"] * (i % 4), "note": None if i % 3 else f"n{i}"}
    if i % 5 == 0:
        row["extra"] = {"k": i}  # a key only some samples have
    return row


def test_varying_records_are_accepted_and_read_back(tmp_path: Path) -> None:
    rows = [_varying(i) for i in range(700)]
    got = _write(tmp_path / "ds", rows, chunk_size=300)
    for i, (row, back) in enumerate(zip(rows, got)):
        assert back == {**row, "extra": row.get("extra")}, i  # a key other rows of the chunk have is None
        assert list(back) == ["id", "tags", "note", "extra"]  # the chunk's keys in first-seen order
    index = load_index(tmp_path / "ds")
    assert [c.chunk_size for c in index.chunks] == [300, 300, 100]
    _, ipc = _split((tmp_path / "ds" / index.chunks[0].filename).read_bytes())
    assert [b.num_rows for b in _batches(ipc)] == [256, 44]  # upstream's reader finds row i in batch i // 256
    assert index.data_format == ["json"] and index.config["types"] is None


def test_compression_goes_into_the_arrow_buffers(tmp_path: Path) -> None:
    rows = [{"text": "lorem ipsum " * 20, "n": i} for i in range(64)]
    for level in ("chunk", "batch", "sample"):
        out = tmp_path / level
        assert _write(out, rows, chunk_size=32, compression="zstd:9", compression_level=level) == rows
        index = load_index(out)
        assert index.config["compression"] is None and index.config["compression_level"] is None
        assert index.config["ipc_compression"] == "zstd"
        assert [c.filename for c in index.chunks] == ["chunk-0-0.bin", "chunk-0-1.bin"]
        ipc = _split((out / "chunk-0-0.bin").read_bytes())[1]
        assert len(ipc) < 32 * 240 / 4  # the IPC buffers are compressed (the texts alone are 7680 bytes)
    uncompressed = tmp_path / "none"
    _write(uncompressed, rows, chunk_size=32)
    assert (uncompressed / "chunk-0-0.bin").stat().st_size > 2 * (tmp_path / "chunk" / "chunk-0-0.bin").stat().st_size


def test_json_leaves_are_unwrapped_into_the_rows(tmp_path: Path) -> None:
    rows = [{"id": i, "turns": JsonLeaf([{"role": "user", "text": f"q{i}"}] * (i % 3))} for i in range(5)]
    got = _write(tmp_path / "ds", rows, chunk_size=5)
    assert got == [{"id": i, "turns": [{"role": "user", "text": f"q{i}"}] * (i % 3)} for i in range(5)]
    assert (tmp_path / "ds" / "chunk-0-0.bin").read_bytes().endswith(ARROW_ROWS_MAGIC)


def test_a_chunk_whose_fields_disagree_is_stored_as_json(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"x": i, "y": [i]} for i in range(4)]
    rows += [{"x": "four", "y": [4]}, {"x": 5, "y": [5, "five"]}, {"x": 6, "y": [1 << 70]}, {"x": 7, "y": []}]
    rows += [{"x": 8.5, "y": None}, {"x": 9, "y": [9]}]
    got = _write(tmp_path / "ds", rows, chunk_size=2)
    assert got == rows  # int and str, int and float, a 70-bit int: nothing coerced or lost
    index = load_index(tmp_path / "ds")
    arrow = [(tmp_path / "ds" / c.filename).read_bytes().endswith(ARROW_ROWS_MAGIC) for c in index.chunks]
    assert arrow == [True, True, False, False, False]


def test_a_value_neither_arrow_nor_json_can_hold_names_the_sample(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=2)
    writer.write({"x": 1, "b": b"raw"})
    writer.write({"x": "one", "b": b"raw"})
    with pytest.raises(ValueError, match=r"sample 0: .*field \['x'\] holds both int and str.*not JSON serializable"):
        writer.done()


def test_a_later_sample_that_is_not_a_row_names_itself(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=2)
    writer.write({"x": 1})
    with pytest.raises(ValueError, match=r"sample 1: field \['v'\] is a ndarray.*Arrow rows.*tolist"):
        writer.write({"x": 2, "v": np.zeros(2)})
    with pytest.raises(ValueError, match=r"sample 1: the sample is a tuple, not a dict"):
        writer.write((1, 2))


class Tagged(Serializer):
    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return f"tag:{data}".encode(), None

    def deserialize(self, data: Any) -> Any:
        return int(bytes(data).decode()[4:])

    def can_serialize(self, data: Any) -> bool:
        return type(data) is int


@pytest.mark.parametrize(
    ("first", "options"),
    [
        ({"x": 1, "v": np.zeros(2)}, {}),  # an array: PyTree items
        ({"x": (1, 2)}, {}),  # tuples are not JSON (upstream agrees)
        ({}, {}),
        ({1: "a"}, {}),  # keys must be str
        ([1, 2], {}),
        ({"x": 1}, {"encryption": "fernet"}),  # upstream leaks or cannot read encrypted rows
        ({"x": 1}, {"serializers": "custom"}),  # your serializers are tried first, so they are used
    ],
)
def test_other_samples_stay_pytree_items(tmp_path: Path, first: Any, options: dict[str, Any]) -> None:
    if options.get("encryption") == "fernet":
        options = {"encryption": FernetEncryption("pw", level="sample")}
    if options.get("serializers") == "custom":
        options = {"serializers": {"tagged": Tagged()}}
    writer = BinaryWriter(tmp_path / "ds", chunk_size=2, **options)
    writer.write(first)
    writer.write(first)
    writer.done()
    writer.merge()
    assert not (tmp_path / "ds" / "chunk-0-0.bin").read_bytes().endswith(ARROW_ROWS_MAGIC)
    assert json.loads((tmp_path / "ds" / "index.json").read_text())["config"]["data_format"] != ["json"]


def test_chunk_bytes_counts_the_rows_as_stored(tmp_path: Path) -> None:
    rows = [{"id": i, "text": f"{i:08d}" * 8} for i in range(4000)]
    _write(tmp_path / "ds", rows, chunk_bytes=64_000, compression="zstd")
    sizes = [c.chunk_bytes for c in load_index(tmp_path / "ds").chunks]
    # The first chunk is sized from the rows' payload; later ones from its bytes per row on disk.
    assert all(size <= 64_000 * 1.1 for size in sizes[1:-1]) and all(size >= 64_000 * 0.8 for size in sizes[1:-1])


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.glob("chunk-*"))}


@pytest.mark.parametrize(
    ("rows", "options", "n"),
    [
        ("json", {"chunk_bytes": 1500}, 300),
        # Chunks of 14, 8, 5, 3, 2 rows as the bytes-per-row estimate settles, then one row each from
        # row ~33 on: 80 rows hold every step of that and 45 one-row chunks (with 300 rows, 270 of them,
        # each resume rewriting the rest: 37,000 chunk files, most of the file's time).
        ("json", {"chunk_bytes": 800, "compression": "zstd"}, 80),
        ("pytree", {"chunk_bytes": 1500}, 300),
        ("pytree_then_json", {"chunk_bytes": 1500}, 300),
    ],
)
@pytest.mark.filterwarnings("ignore::litdata_format.PickleWriteWarning")  # pytree_then_json pickles a leaf
# With zstd, an Arrow chunk's schema and framing nearly fill 800 B: chunks of one row, over the target.
@pytest.mark.filterwarnings("ignore:An item was larger than the target chunk size:UserWarning")
def test_a_writer_resumed_after_any_chunk_cuts_the_chunks_of_an_uninterrupted_one(
    tmp_path: Path, rows: str, options: dict[str, Any], n: int
) -> None:
    """What optimize(use_checkpoint=True) does after kill -9: a fresh writer goes on after the last chunk written."""

    def row(i: int) -> Any:
        value = {"i": i, "text": f"{i:05d}" * (1 + i % 17), "raw": bytes([i % 251]) * (i % 29)}
        if rows == "pytree" or (rows == "pytree_then_json" and i == 0):
            # Not a JSON-like dict: PyTree items, the i leaf pickled (ints after it too, as that leaf was fixed)
            value["i"] = np.int64(i)
        return value

    clean = BinaryWriter(tmp_path / "clean", **options)
    boundaries: list[tuple[int, list[Any], dict[str, Any]]] = []  # (first sample after, chunks, state)
    for i in range(n):
        if clean.add_item(i, row(i)) is not None:
            boundaries.append((i, list(clean.chunks), clean.resume_state()))
    clean.done()
    assert len(boundaries) >= 8
    for first, chunks, state in boundaries:
        out = tmp_path / f"resumed-{first}"
        out.mkdir()
        for chunk in chunks:
            (out / chunk.filename).write_bytes((tmp_path / "clean" / chunk.filename).read_bytes())
        resumed = BinaryWriter(out, chunk_index=len(chunks), **options)
        resumed.resume(chunks, json.loads(json.dumps(state)))  # as a checkpoint file carries it
        for i in range(first, n):  # the sample that closed the last chunk is in no chunk yet
            resumed.add_item(i, row(i))
        resumed.done()
        assert resumed.chunks == clean.chunks, f"resumed after sample {first}"
        assert _files(out) == _files(tmp_path / "clean"), f"resumed after sample {first}"
        assert resumed.config() == clean.config()


def test_resume_refuses_a_state_it_does_not_know(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path / "ds", chunk_bytes=1000)
    with pytest.raises(ValueError, match=r"ckpt\.json: not a writer state"):
        writer.resume([], {"arrow_rows": "yes"}, "ckpt.json")
    writer.add_item(0, {"a": 1})
    with pytest.raises(ValueError, match="fresh writer"):
        writer.resume([], {})


def _ipc_by_pa_array(rows: list[dict[str, Any]], compression: str | None) -> bytes:
    """The IPC file the writer made before its columns were built from their buffers (``pa.array``)."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    table = pa.table({key: pa.array([row.get(key) for row in rows]) for key in keys})
    codec = pa.Codec("zstd", compression_level=4) if compression else None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as writer:
        for batch in table.to_batches(max_chunksize=256):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("count", [1, 255, 257, 600])
def test_columns_built_from_buffers_write_the_bytes_pa_array_writes(
    tmp_path: Path, count: int, compression: str | None
) -> None:
    rng = np.random.default_rng(count)
    rows = [
        {
            "image": rng.bytes(int(rng.integers(0, 2000))),
            "label": int(rng.integers(-(2**40), 2**40)),
            "score": float(rng.random()),
            "flag": bool(rng.random() < 0.5),
            "name": "é" * int(rng.integers(0, 4)) + str(i),
            "tags": [1, 2],
            "maybe": None if i % 3 else i,
        }
        for i in range(count)
    ]
    writer = BinaryWriter(tmp_path, chunk_bytes=1 << 30, compression=compression)
    for i, row in enumerate(rows):
        writer.add_item(i, row)
    writer.done()
    data = (tmp_path / writer.chunks[0].filename).read_bytes()
    assert data.endswith(ARROW_ROWS_MAGIC)
    (ipc_len,) = struct.unpack_from("<I", data, len(data) - 4 - len(ARROW_ROWS_MAGIC))
    ipc = data[len(data) - 4 - len(ARROW_ROWS_MAGIC) - ipc_len : len(data) - 4 - len(ARROW_ROWS_MAGIC)]
    assert ipc == _ipc_by_pa_array(rows, compression)


def test_writing_rows_of_bytes_and_numbers_does_not_import_pandas(tmp_path: Path) -> None:
    # pa.array on a list imports pandas when it is installed (1-3 s in every optimize worker).
    code = (
        "import sys\nfrom litdata_format import BinaryWriter\n"
        f"w = BinaryWriter({str(tmp_path)!r})\n"
        "for i in range(300):\n"
        "    w.add_item(i, {'image': bytes(100), 'label': i, 'score': 0.5, 'ok': True, 'name': 'x'})\n"
        "w.done()\nassert w.chunks, 'no chunk'\nprint('pandas' in sys.modules)\n"
    )
    assert importlib.util.find_spec("pandas") is not None, "pandas is installed in this workspace"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_flat_rows_without_compression_are_written_without_importing_pyarrow(tmp_path: Path) -> None:
    # Importing pyarrow costs an optimize worker 50-150 ms; such rows need none of it (_arrow_ipc).
    code = (
        "import sys\nfrom litdata_format import BinaryWriter\n"
        f"w = BinaryWriter({str(tmp_path)!r}, chunk_bytes=40_000)\n"
        "for i in range(700):\n"
        "    w.add_item(i, {'image': bytes(i % 90), 'label': i, 'score': 0.5, 'ok': None, 'name': 'x' * (i % 3)})\n"
        "w.done()\nassert len(w.chunks) > 1, w.chunks\nprint('pyarrow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
    rows = [{"image": bytes(i % 90), "label": i, "score": 0.5, "ok": None, "name": "x" * (i % 3)} for i in range(700)]
    index = complete_dataset(tmp_path)
    reader = DatasetReader(tmp_path)
    try:
        assert [reader[i] for i in range(len(reader))] == rows
    finally:
        reader.close()
    assert sum(c.chunk_size for c in index.chunks) == len(rows)


def _ipc_of(path: Path) -> bytes:
    data = path.read_bytes()
    return _split(data)[1]


def _image_row(i: int) -> dict[str, Any]:
    return {"image": bytes([i % 251]) * (1000 + i % 700), "label": i % 1000}


def _widening_row(i: int) -> dict[str, Any]:
    """Rows whose kind widens after the first record batches: the chunk's IPC file starts over."""
    row: dict[str, Any] = {"id": i, "note": None if i < 300 else f"n{i}", "tags": [] if i < 400 else ["t"] * (i % 3)}
    row["objs"] = [{"a": i}, {"b": str(i)}] if i % 7 == 0 else []
    if i == 599:
        row["late"] = 1.5  # a key first seen in the last, partial batch
    return row


def _flat_row(i: int) -> dict[str, Any]:
    """Scalars with None here and there, text only from row 300 on, batches of bytes off a 64-byte boundary."""
    row: dict[str, Any] = {
        "id": i,
        "note": None if i < 300 else "é" * (i % 5),
        "raw": None if i % 4 == 0 else bytes(i % 9),
    }
    row.update(
        {"f": None if i % 5 == 0 else i / 3, "ok": None if i % 6 == 0 else i % 2 == 0, "maybe": None if i % 3 else i}
    )
    if i == 599:
        row["late"] = 1.5  # a key first seen in the last, partial batch
    return row


def _tiny_bytes_row(i: int) -> dict[str, Any]:
    """Values of 0-2 bytes: a batch's padding (to 64 bytes) takes the bytes of many rows after it."""
    return {"image": bytes([i % 251]) * (i % 3), "label": i}


def _null_column_row(i: int) -> dict[str, Any]:
    """A column of None only (no buffers at all in the IPC file), empty bytes, negative numbers."""
    return {"nothing": None, "raw": b"" if i % 2 else b"xyz", "n": -i, "x": -i / 7, "b": i % 3 == 0}


def _wide_row(i: int) -> dict[str, Any]:
    """300 columns of every flat kind: schema and record-batch messages of tens of KiB, many vtables alike."""
    row: dict[str, Any] = {}
    for j in range(300):
        values = (i * j, i / (j + 1), f"s{i}-{j}", bytes(j % 5), i % 2 == 0)
        row[f"c{j:03d}"] = None if (i + j) % 11 == 0 else values[j % 5]
    return row


def _new_keys_row(i: int) -> dict[str, Any]:
    """A new key every 300 rows: more widenings than the writer starts its IPC file over for."""
    return {"id": i, **{f"k{j}": j for j in range(i // 300)}}


@pytest.mark.parametrize(
    ("make", "count", "compression"),
    [
        (_image_row, 1000, None),
        (_image_row, 1000, "zstd"),
        (_image_row, 256, None),
        (_image_row, 513, None),
        (_varying, 700, None),
        (_flat_row, 600, None),
        (_flat_row, 1200, "zstd"),
        (_tiny_bytes_row, 1000, None),
        (_null_column_row, 1, None),
        (_null_column_row, 700, None),
        (_widening_row, 600, None),
        (_widening_row, 600, "zstd"),
        (_new_keys_row, 1300, None),
        (_wide_row, 600, None),
    ],
)
def test_rows_written_batch_by_batch_as_they_come_are_the_bytes_of_whole_columns(
    tmp_path: Path, make: Any, count: int, compression: str | None
) -> None:
    """The record batches written while the rows come in are those of the whole table cut in 256s."""
    rows = [make(i) for i in range(count)]
    writer = BinaryWriter(tmp_path, chunk_bytes=1 << 30, compression=compression)
    for i, row in enumerate(rows):
        writer.add_item(i, row)
    writer.done()
    assert len(writer.chunks) == 1
    assert _ipc_of(tmp_path / writer.chunks[0].filename) == _ipc_by_pa_array(rows, compression)
    assert writer.chunks[0].chunk_bytes == (tmp_path / writer.chunks[0].filename).stat().st_size


def test_rows_added_out_of_order_are_sorted_into_the_chunk(tmp_path: Path) -> None:
    rows = [_image_row(i) for i in range(700)]
    order = [*range(300), *reversed(range(300, 700))]  # in order for a full batch, then backwards
    writer = BinaryWriter(tmp_path, chunk_bytes=1 << 30)
    for i in order:
        writer.add_item(i, rows[i])
    writer.done()
    assert _ipc_of(tmp_path / writer.chunks[0].filename) == _ipc_by_pa_array(rows, None)


def test_rows_are_taken_into_the_chunk_a_record_batch_at_a_time(tmp_path: Path) -> None:
    """A row is built into its chunk when its record batch of 256 is full, not when the chunk closes.

    Seen from outside with a mutable value: a bytearray changed after its batch was full is
    stored as it was, one changed while its batch is still open as it is at the chunk's end.
    """
    values = [bytearray(b"%04d" % i) for i in range(300)]
    writer = BinaryWriter(tmp_path, chunk_bytes=1 << 30)
    for i, value in enumerate(values):
        writer.add_item(i, {"raw": value, "i": i})
    values[0][:] = b"late"  # in the first batch, written when row 255 came
    values[299][:] = b"late"  # in the last batch, still open
    writer.done()
    writer.merge()
    reader = DatasetReader(tmp_path)
    try:
        assert reader[0]["raw"] == b"0000"
        assert reader[299]["raw"] == b"late"
    finally:
        reader.close()


def test_a_value_arrow_cannot_hold_in_a_streamed_batch_falls_back_to_json(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"x": i, "s": f"{i}"} for i in range(600)]
    rows[300]["x"] = 1 << 70  # a 70-bit int: the second record batch fails while the rows come in
    got = _write(tmp_path / "ds", rows, chunk_bytes=1 << 30)
    assert got == rows
    index = load_index(tmp_path / "ds")
    assert not (tmp_path / "ds" / index.chunks[0].filename).read_bytes().endswith(ARROW_ROWS_MAGIC)
