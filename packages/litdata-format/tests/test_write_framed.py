"""Writing the in-file zstd layouts (``compression_level="batch"`` / ``"sample"``) as upstream 0.2.76 does.

The golden check writes the samples of upstream's fixtures with the same options and compares
the files with upstream's: the same header, item offsets and frame table, and frames that
inflate to the same bytes (compressed bytes depend on the zstd build, so they are not compared).
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import zstandard

from litdata_format import BinaryWriter, DatasetReader, FernetEncryption, TokensLoader, load_index

UPSTREAM = Path(__file__).parent / "fixtures" / "upstream-0.2.76"


def _load_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("litdata_fixture_samples_w", UPSTREAM.parent / "samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_samples()


def _write(path: Path, items: list[Any], **options: Any) -> DatasetReader:
    writer = BinaryWriter(path, **options)
    for i, item in enumerate(items):
        writer.add_item(i, item)
    writer.done()
    writer.merge()
    return DatasetReader(path)


def _framed_parts(data: bytes) -> tuple[tuple[int, ...], list[int], list[tuple[int, int, int]], list[bytes]]:
    """(prefix fields but the magic, offsets, (first, count, plain_len) per frame, inflated frames)."""
    magic, *prefix = struct.unpack_from("<8sHHIII", data, 0)
    assert magic == b"LDFZ01\0\0"
    count, num_frames = prefix[2], prefix[4]
    offsets = list(struct.unpack_from(f"<{count + 1}I", data, 24))
    table = 24 + 4 * (count + 1)
    frames, inflated = [], []
    for k in range(num_frames):
        first, items, start, stored, plain = struct.unpack_from("<IIQII", data, table + 24 * k)
        frames.append((first, items, plain))
        inflated.append(zstandard.ZstdDecompressor().decompress(data[start : start + stored]))
    return tuple(prefix), offsets, frames, inflated


def _sample_level_parts(data: bytes) -> tuple[int, list[bytes]]:
    (count,) = struct.unpack_from("<I", data, 0)
    offsets = struct.unpack_from(f"<{count + 1}I", data, 4)
    items = [data[offsets[i] : offsets[i + 1]] for i in range(count)]
    assert all(item[:4] == b"\x28\xb5\x2f\xfd" for item in items)  # each item is its own zstd frame
    return count, [zstandard.ZstdDecompressor().decompress(item) for item in items]


@pytest.mark.parametrize("name", ["zstd_framed", "zstd_framed_default", "zstd_sample_level"])
def test_we_write_what_upstream_wrote(tmp_path: Path, name: str) -> None:
    meta = samples.FIXTURES[name]
    make = getattr(samples, meta["generator"])
    items = [make(i) for i in range(meta["num_samples"])]
    options = dict(meta["optimize_kwargs"])
    if name == "zstd_framed_default":
        options["compression_level"] = "batch"  # upstream's default; ours is "chunk"
    reader = _write(tmp_path, items, **options)

    theirs = json.loads((UPSTREAM / name / "index.json").read_text())
    ours = json.loads((tmp_path / "index.json").read_text())
    for key in ("compression", "compression_level", "compression_batch_size", "data_format", "data_spec"):
        assert ours["config"][key] == theirs["config"][key], key
    assert [c["filename"] for c in ours["chunks"]] == [c["filename"] for c in theirs["chunks"]]
    assert [c["chunk_size"] for c in ours["chunks"]] == [c["chunk_size"] for c in theirs["chunks"]]
    parts = _framed_parts if ours["config"]["compression_level"] == "batch" else _sample_level_parts
    for chunk in ours["chunks"]:
        mine = (tmp_path / chunk["filename"]).read_bytes()
        assert chunk["chunk_bytes"] == len(mine)  # the file's own size, as upstream records it
        assert parts(mine) == parts((UPSTREAM / name / chunk["filename"]).read_bytes()), chunk["filename"]
    for i, item in enumerate(items):
        got = reader[i]
        assert got["index"] == item["index"] and got["text"] == item["text"]
        np.testing.assert_array_equal(got["arr"], item["arr"])


def test_frames_split_runs_of_items_and_read_back_in_any_order(tmp_path: Path) -> None:
    items = [{"i": i, "v": np.arange(i % 5, dtype=np.int16), "s": "z" * (i * 37 % 300)} for i in range(50)]
    reader = _write(tmp_path, items, chunk_size=20, compression="zstd:3", compression_batch_size=7)
    first = (tmp_path / "chunk-0-0.bin").read_bytes()
    prefix, offsets, frames, inflated = _framed_parts(first)
    assert prefix == (1, 0, 20, 7, 3)  # version, flags, items, items per frame, frames
    assert [(f, n) for f, n, _ in frames] == [(0, 7), (7, 7), (14, 6)]
    assert len(b"".join(inflated)) == offsets[-1]
    for i in [49, 0, 13, 14, 6, 7, 21, 40]:
        got = reader[i]
        assert got["i"] == i and got["s"] == items[i]["s"]
        np.testing.assert_array_equal(got["v"], items[i]["v"])


def test_the_default_stays_whole_file_compression(tmp_path: Path) -> None:
    _write(tmp_path, list(range(10)), chunk_size=4, compression="zstd")
    index = load_index(tmp_path)
    assert [c.filename for c in index.chunks] == ["chunk-0-0.zstd.bin", "chunk-0-1.zstd.bin", "chunk-0-2.zstd.bin"]
    assert index.config["compression_level"] is None and index.config["compression_batch_size"] is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"compression_level": "batch"}, "also pass compression='zstd'"),
        ({"compression_batch_size": 8}, "also pass compression='zstd'"),
        ({"compression": "zstd", "compression_level": 4}, "use compression='zstd:4' for the level"),
        ({"compression": "zstd", "compression_level": "frame"}, "compression_level must be None, 'chunk'"),
        ({"compression": "zstd", "compression_level": "sample", "compression_batch_size": 8}, "means nothing"),
        ({"compression": "zstd", "compression_batch_size": 0}, "compression_batch_size must be a positive int"),
        ({"compression": "zstd", "compression_level": "batch", "item_loader": TokensLoader()}, "PyTreeLoader"),
    ],
)
def test_bad_levels_are_refused_by_name(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BinaryWriter(tmp_path, chunk_size=4, **options)


def test_in_file_compression_refuses_encryption(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be combined with encryption"):
        BinaryWriter(
            tmp_path, chunk_size=4, compression="zstd", compression_level="sample", encryption=FernetEncryption("pw")
        )
