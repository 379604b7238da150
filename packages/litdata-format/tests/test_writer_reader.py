from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

from litdata_format import (
    BinaryWriter,
    DatasetReader,
    PyTreeLoader,
    TokensLoader,
    complete_dataset,
    is_complete_dataset,
    load_index,
)
from litdata_format.internal import loader_for


def _sample(i: int) -> dict:
    return {
        "index": i,
        "name": f"s{i}",
        "flag": i % 2 == 0,
        "x": i / 2,
        "raw": bytes([i % 256]) * (i % 5),
        "vec": np.arange(i, dtype=np.int64),
        "mat": np.full((2, 3), i, dtype=np.float32),
        "pair": (i, [str(i), None]),
    }


def _assert_same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b and type(a) is type(b)


def _write(path: Path, samples: list, **kwargs: object) -> None:
    writer = BinaryWriter(path, **kwargs)  # type: ignore[arg-type]
    for i, sample in enumerate(samples):
        writer.add_item(i, sample)
    writer.done()
    writer.merge()


@pytest.mark.parametrize("options", [{"chunk_size": 4}, {"chunk_bytes": 300}, {"chunk_bytes": "1KB"}, {}])
@pytest.mark.filterwarnings("ignore:An item was larger than the target chunk size:UserWarning")  # 300 B: some are
def test_round_trip(tmp_path: Path, options: dict) -> None:
    samples = [_sample(i) for i in range(23)]
    _write(tmp_path, samples, **options)
    reader = DatasetReader(tmp_path)
    assert len(reader) == 23
    for i, sample in enumerate(samples):
        _assert_same(sample, reader[i])
    index = load_index(tmp_path)
    assert index.num_items == 23
    assert next(c.filename for c in index.chunks) == "chunk-0-0.bin"
    if "chunk_size" in options:
        assert [c.chunk_size for c in index.chunks] == [4, 4, 4, 4, 4, 3]


@pytest.mark.parametrize("size", [100, 9000])  # joined in memory / written as parts
def test_chunks_of_small_and_large_items_hold_the_same_bytes(tmp_path: Path, size: int) -> None:
    samples = [{"raw": bytes([i]) * (size + i)} for i in range(20)]
    _write(tmp_path, samples, chunk_bytes=size * 7)
    index = load_index(tmp_path)
    assert len(index.chunks) > 2
    for chunk in index.chunks:  # the index records each file's exact size
        assert chunk.chunk_bytes == (tmp_path / chunk.filename).stat().st_size
    assert [s["raw"] for s in DatasetReader(tmp_path)] == [s["raw"] for s in samples]


def test_layout_bytes(tmp_path: Path) -> None:
    # PyTree items (a dict of JSON-like values is otherwise written as Arrow rows)
    _write(tmp_path, [{"index": 7, "name": "ab"}], chunk_size=10, arrow_rows=False)
    data = (tmp_path / "chunk-0-0.bin").read_bytes()
    count, first, end = struct.unpack_from("<III", data)
    assert (count, first) == (1, 12)
    sizes = struct.unpack_from("<II", data, first)
    assert sizes == (8, 2)
    assert data[first + 8 : first + 16] == struct.pack("<q", 7)
    assert data[first + 16 : end] == b"ab"
    index = json.loads((tmp_path / "index.json").read_text())
    checksum = f"xxh3_64:{xxhash.xxh3_64_intdigest(data):016x}"
    assert index["chunks"] == [
        {"checksum": checksum, "chunk_bytes": len(data), "chunk_size": 1, "dim": None, "filename": "chunk-0-0.bin"}
    ]
    assert index["config"]["data_format"] == ["int", "str"]
    assert index["config"]["item_loader"] == "PyTreeLoader"
    assert not (tmp_path / "0.index.json").exists()


def test_out_of_order_items_are_sorted_in_chunks(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=10)
    for i in [3, 1, 2, 0]:
        writer.add_item(i, i * 10)
    writer.done()
    writer.merge()
    assert list(DatasetReader(tmp_path)) == [0, 10, 20, 30]


def test_several_ranks_merge(tmp_path: Path) -> None:
    for rank in range(3):
        writer = BinaryWriter(tmp_path, chunk_size=2, rank=rank)
        for i in range(5):
            writer.write(rank * 100 + i)
        writer.done()
    assert not is_complete_dataset(tmp_path)
    complete_dataset(tmp_path)
    assert is_complete_dataset(tmp_path)
    assert list(DatasetReader(tmp_path)) == [r * 100 + i for r in range(3) for i in range(5)]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".json")) == ["index.json"]


def test_merge_orders_chunks_naturally(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=1, rank=0)
    for i in range(12):
        writer.write(i)
    writer.done()
    index = complete_dataset(tmp_path)
    assert [c.filename for c in index.chunks][:3] == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin"]
    assert list(DatasetReader(tmp_path)) == list(range(12))


def test_zstd_classic(tmp_path: Path) -> None:
    samples = [_sample(i) for i in range(10)]
    _write(tmp_path, samples, chunk_size=4, compression="zstd:7")
    names = sorted(p.name for p in tmp_path.glob("chunk-*"))
    assert names == ["chunk-0-0.zstd:7.bin", "chunk-0-1.zstd:7.bin", "chunk-0-2.zstd:7.bin"]
    reader = DatasetReader(tmp_path)
    for i, sample in enumerate(samples):
        _assert_same(sample, reader[i])


def test_tokens(tmp_path: Path) -> None:
    streams = [np.arange(start, start + length, dtype=np.int32) for start, length in [(0, 10), (100, 7), (200, 20)]]
    _write(tmp_path, streams, chunk_size=20, item_loader=TokensLoader())
    index = load_index(tmp_path)
    assert index.config["data_format"] == ["no_header_numpy:2"]
    assert [(c.chunk_size, c.dim) for c in index.chunks] == [(2, 17), (1, 20)]
    reader = DatasetReader(tmp_path, item_loader=TokensLoader(block_size=4))
    assert len(reader) == 17 // 4 + 20 // 4
    flat = np.concatenate(streams[:2])
    np.testing.assert_array_equal(reader[0], flat[:4])
    np.testing.assert_array_equal(reader[3], flat[12:16])
    np.testing.assert_array_equal(reader[4], streams[2][:4])


def test_loader_for_an_index_is_the_kind_it_was_written_with(tmp_path: Path) -> None:
    _write(tmp_path / "tokens", [np.arange(8, dtype=np.int32)], item_loader=TokensLoader())
    _write(tmp_path / "tree", [_sample(0)])
    tokens, tree = loader_for(load_index(tmp_path / "tokens")), loader_for(load_index(tmp_path / "tree"))
    assert type(tokens) is TokensLoader and tokens.block_size is None
    assert type(tree) is PyTreeLoader
    assert loader_for(load_index(tmp_path / "tree")) is not tree  # a new loader each time: setup binds it
    with pytest.raises(ValueError, match="block_size"):
        DatasetReader(tmp_path / "tokens")
    assert DatasetReader(tmp_path / "tree")[0]["name"] == "s0"


def test_tokens_after_the_first_array_are_checked_as_the_first(tmp_path: Path) -> None:
    """Arrays like the first take a shortcut to their bytes; any other is refused as before, naming itself."""
    loader = TokensLoader()
    writer = BinaryWriter(tmp_path, chunk_size=100, item_loader=loader)
    writer.add_item(0, np.arange(5, dtype=np.int32))
    view = np.arange(20, dtype=np.int32)[::2]  # not contiguous: its bytes are those of its elements, in order
    writer.add_item(1, view)
    for index, other in [(2, np.arange(3, dtype=np.int64)), (3, np.zeros((2, 2), dtype=np.int32)), (4, [1, 2])]:
        with pytest.raises((TypeError, ValueError), match=f"sample {index}|no_header|1-D|one 1-D"):
            writer.add_item(index, other)
    writer.add_item(2, np.array([7, 8], dtype=np.int32))
    writer.done()
    writer.merge()
    assert [(c.chunk_size, c.dim) for c in load_index(tmp_path).chunks] == [(3, 17)]
    reader = DatasetReader(tmp_path, item_loader=TokensLoader(block_size=17))
    np.testing.assert_array_equal(reader[0], np.concatenate([np.arange(5), np.arange(0, 20, 2), [7, 8]]))


def test_tokens_tensor(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    _write(
        tmp_path, [torch.arange(i * 10, i * 10 + 9, dtype=torch.int32) for i in range(4)], item_loader=TokensLoader()
    )
    assert load_index(tmp_path).config["data_format"] == ["no_header_tensor:16"]
    reader = DatasetReader(tmp_path, item_loader=TokensLoader(block_size=6))
    assert len(reader) == 6
    block = reader[1]
    assert isinstance(block, torch.Tensor) and block.dtype == torch.int32
    assert block.tolist() == [6, 7, 8, 10, 11, 12]


def test_tensors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    samples = [
        {"t": torch.full((2, 2), float(i)), "v": torch.arange(i, dtype=torch.int32), "b": torch.ones(3, 1).bfloat16()}
        for i in range(5)
    ]
    _write(tmp_path, samples, chunk_size=2)
    index = load_index(tmp_path)
    assert index.config["data_format"] == ["tensor", "no_header_tensor:16", "tensor"]
    data = (tmp_path / "chunk-0-0.bin").read_bytes()
    first = struct.unpack_from("<I", data, 4)[0]
    assert data[first + 12 : first + 20] == bytes.fromhex("0000000100000002")  # big-endian header: float32 -> 1
    reader = DatasetReader(tmp_path)
    for i, sample in enumerate(samples):
        got = reader[i]
        for key in sample:
            assert got[key].dtype == sample[key].dtype
            assert torch.equal(got[key], sample[key])


def test_serializer_order_matches_upstream_for_scalars(tmp_path: Path) -> None:
    _write(tmp_path, [{"b": True, "i": 1, "f": 1.0, "s": "x", "n": None, "y": b"1"}], arrow_rows=False)
    assert load_index(tmp_path).data_format == ["bool", "int", "float", "str", "pickle", "bytes"]


@pytest.mark.parametrize(
    ("first", "later", "unlike"),
    [
        (3, [0, -(2**63), 2**63 - 1], [True, 2**64, 1.0]),
        (0.5, [-1.25, float("inf")], [1, np.float32(1)]),
        ("a", ["", "žluť", "x" * 1000], [b"a", "\ud800"]),
        (b"a", [b"", b"xyz"], [bytearray(b"a"), "a"]),
        (np.arange(3, dtype=np.int32), [np.arange(0, dtype=np.int32), np.arange(6, dtype=np.int32)[::2]],
         [np.arange(3, dtype=np.int64), [1, 2], np.ones((2, 2), dtype=np.int32), np.array(1, dtype=np.int32)]),
        (np.ones((2, 2)), [np.zeros((3, 1)), np.ones((2, 2), dtype=np.float32)], [[1.0]]),
        ({"k": 1}, [{"k": 2}], [[1]]),
    ],
)  # fmt: skip
def test_leaf_encoders_write_what_serialize_writes(first: Any, later: list[Any], unlike: list[Any]) -> None:
    from litdata_format._samples._registry import resolve_serializers

    serializers = resolve_serializers()
    serializer = next(s for s in serializers.values() if s.can_serialize(first))
    _, name = serializer.serialize(first)
    fmt = name or next(key for key, s in serializers.items() if s is serializer)
    encode = serializer.leaf_encoder(first, fmt)
    for leaf in later:
        assert encode(leaf) == bytes(serializer.serialize(leaf)[0])
    for leaf in unlike:  # the writer then takes the checked path, which names what is wrong
        with pytest.raises(Exception):  # noqa: B017 - any exception means "not like the first"
            encode(leaf)


def test_samples_unlike_the_first_still_get_their_errors(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=10)
    writer.write({"n": 1, "v": np.arange(2, dtype=np.int16)})
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        writer.write({"n": 2**64, "v": np.arange(2, dtype=np.int16)})
    with pytest.raises(TypeError, match=r"sample 1, leaf 1 \(sample\['v'\]\): encoded as 'no_header_numpy:3'"):
        writer.write({"n": 2, "v": np.arange(2, dtype=np.int64)})
    with pytest.raises(TypeError, match=r"sample 1, leaf 0 \(sample\['n'\]\): a bool cannot be stored as 'int'"):
        writer.write({"n": True, "v": np.arange(2, dtype=np.int16)})
    writer.write({"n": 3, "v": np.arange(3, dtype=np.int16)[::-1]})  # a view: stored in C order
    writer.done()
    writer.merge()
    samples = list(DatasetReader(tmp_path))
    assert [s["n"] for s in samples] == [1, 3]
    assert samples[1]["v"].tolist() == [2, 1, 0]


def test_existing_file_path_is_not_stored_as_str(tmp_path: Path) -> None:
    target = tmp_path / "file.xyz"
    target.write_text("hello")
    out = tmp_path / "out"
    _write(out, [{"p": str(target)}])
    assert load_index(out).data_format != ["str"]


def test_no_torch_needed_for_numpy_datasets(tmp_path: Path) -> None:
    _write(tmp_path, [_sample(i) for i in range(3)])
    code = (
        "import sys, litdata_format as lf; r = lf.DatasetReader(sys.argv[1]); "
        "[r[i] for i in range(len(r))]; print('torch' in sys.modules)"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_atomic_files_leave_no_temporaries(tmp_path: Path) -> None:
    _write(tmp_path, [_sample(i) for i in range(9)], chunk_size=2)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_the_temporary_file_of_a_write_names_its_target(tmp_path: Path) -> None:
    # What a process killed mid-write leaves: its owner recognises it by name and removes it.
    from litdata_format.internal import atomic_file, temp_target

    for suffix in (".tmp", ".part"):
        with atomic_file(tmp_path / "index.json", suffix=suffix) as handle:
            (left,) = [p.name for p in tmp_path.iterdir() if p.name != "index.json"]
            assert temp_target(left) == "index.json"
            handle.write(b"{}")
    assert [temp_target(n) for n in ("index.json", ".index.json", ".notes.txt.tmp", "a.b.12345678.tmp")] == [None] * 4


def test_a_file_written_as_parts_is_their_concatenation(tmp_path: Path) -> None:
    from litdata_format.internal import write_file_atomic

    parts = [bytes([i % 256]) * (i % 7) for i in range(3000)]  # more parts than one gathered write takes
    write_file_atomic(tmp_path / "parts.bin", parts)
    assert (tmp_path / "parts.bin").read_bytes() == b"".join(parts)


def test_an_atomic_write_makes_its_folder_and_gives_the_usual_mode(tmp_path: Path) -> None:
    # The writer's own system calls (no mkstemp, no buffered file) must do what atomic_file does.
    import stat

    from litdata_format.internal import write_file_atomic

    target = tmp_path / "a" / "b" / "x.bin"
    values = np.arange(5, dtype=np.int32)
    write_file_atomic(target, values.data)  # a memoryview of int32 items: counted in bytes
    assert target.read_bytes() == values.tobytes() and os.listdir(target.parent) == ["x.bin"]
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    write_file_atomic(str(target), b"again")
    assert target.read_bytes() == b"again" and os.listdir(target.parent) == ["x.bin"]


def test_a_chunk_cut_short_by_the_file_size_limit_leaves_nothing(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes the kernel stop the gathered write at the limit (a real short write), and
    # the next write fail with EFBIG: the writer must fail, and leave neither chunk nor temporary.
    code = (
        "import resource, signal, sys\n"
        "from litdata_format.internal import write_file_atomic\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    write_file_atomic(sys.argv[1] + '/chunk.bin', [b'x' * 100_000, b'y' * 100_000])\n"
        "except OSError as err:\n"
        "    print(err.errno)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "27" and os.listdir(tmp_path) == []  # EFBIG


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chunk_size": 0}, "chunk_size must be a positive int, got 0"),
        ({"chunk_bytes": "64 parsecs"}, "chunk_bytes"),
        ({"compression": "zstd:99"}, "zstd"),
        ({"compression_level": "frame"}, "compression_level must be None, 'chunk', 'batch' or 'sample'"),
        ({"encryption": "secret"}, "encryption must be an Encryption"),
    ],
)
def test_writer_options_are_checked_by_one_function_before_anything_is_written(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    from litdata_format.internal import check_writer_options

    with pytest.raises(ValueError, match=message):
        check_writer_options(**options)
    with pytest.raises(ValueError, match=message):
        BinaryWriter(tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()  # the writer refuses before it creates its folder


def test_checked_writer_options_fill_in_the_writers_defaults() -> None:
    from litdata_format import PyTreeLoader
    from litdata_format.internal import check_writer_options

    options = check_writer_options(chunk_bytes="1MB", compression="zstd", compression_batch_size=8)
    assert (options.chunk_size, options.chunk_bytes, options.compression) == (None, 1_000_000, "zstd")
    assert (options.compression_level, options.frame_rows, type(options.item_loader)) == ("batch", 8, PyTreeLoader)
    assert check_writer_options().chunk_bytes == 1 << 26
