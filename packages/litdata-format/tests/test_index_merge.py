"""The one index merge: chunk names, what counts as the same layout, and the order of the merged chunks.

Before, three merges disagreed: this one compared whole configs (so writers cut into different
chunk sizes, or one that got no sample, could not be merged), prep's optimize took ``pil`` and
``jpeg`` leaves for the same (publishing items no reader decodes), and merge_datasets compared
five fields. These tests pin the one rule.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from litdata_format import (
    BinaryWriter,
    ChunkInfo,
    DatasetIndex,
    DatasetReader,
    complete_dataset,
    layout_differences,
    load_index,
    merge_indexes,
)
from litdata_format.internal import chunk_name, parse_chunk_name, rank_index_name


def test_chunk_names_round_trip() -> None:
    assert chunk_name(3, 12) == "chunk-3-12.bin"
    assert chunk_name(3, 12, "zstd:7") == "chunk-3-12.zstd:7.bin"
    assert parse_chunk_name(chunk_name(3, 12)) == (3, 12)
    assert parse_chunk_name(chunk_name(0, 5, "zstd")) == (0, 5)
    for other in ("0.index.json", "chunk-0.bin", "chunk-a-1.bin", "train/0000.parquet", "shard.00000.mds"):
        assert parse_chunk_name(other) is None
    assert rank_index_name(4) == "4.index.json"


def _write(folder: Path, rank: int, samples: list[object], **options: object) -> None:
    writer = BinaryWriter(folder, rank=rank, **options)  # type: ignore[arg-type]
    for sample in samples:
        writer.write(sample)
    writer.done()


def test_ranks_cut_into_different_chunk_sizes_merge(tmp_path: Path) -> None:
    _write(tmp_path, 0, list(range(5)), chunk_size=2)
    _write(tmp_path, 1, list(range(5, 9)), chunk_bytes=1 << 20)
    index = complete_dataset(tmp_path)
    assert index.config["chunk_size"] == 2  # the first part's
    assert list(DatasetReader(tmp_path)) == list(range(9))


def test_a_rank_without_samples_adds_nothing(tmp_path: Path) -> None:
    _write(tmp_path, 0, [], chunk_size=2)
    _write(tmp_path, 1, [1, 2, 3], chunk_size=2)
    _write(tmp_path, 2, [], chunk_size=2)
    complete_dataset(tmp_path)
    assert list(DatasetReader(tmp_path)) == [1, 2, 3]


def test_no_rank_with_samples_is_an_empty_dataset_as_upstream_writes_it(tmp_path: Path) -> None:
    _write(tmp_path, 0, [], chunk_size=2)
    _write(tmp_path, 1, [], chunk_size=2)
    complete_dataset(tmp_path)
    raw = (tmp_path / "index.json").read_text()
    assert '"chunks": []' in raw and '"config": null' in raw
    assert list(DatasetReader(tmp_path)) == []


def _image(kind: str) -> object:
    from PIL import Image

    picture = Image.fromarray(np.full((8, 8, 3), 200, dtype=np.uint8), mode="RGB")
    if kind == "pil":
        return picture
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG")
    return Image.open(buffer)  # a JpegImageFile: stored as the file ("jpeg")


def test_pil_and_jpeg_leaves_are_different_layouts(tmp_path: Path) -> None:
    _write(tmp_path, 0, [{"image": _image("jpeg")}], chunk_size=2)
    _write(tmp_path, 1, [{"image": _image("pil")}], chunk_size=2)
    assert load_index(tmp_path / rank_index_name(0)).data_format == ["jpeg"]
    assert load_index(tmp_path / rank_index_name(1)).data_format == ["pil"]
    expected = r"1\.index\.json has a different sample layout .*\(data_format: \['jpeg'\] vs \['pil'\]\)"
    with pytest.raises(ValueError, match=expected):
        complete_dataset(tmp_path)
    assert not (tmp_path / "index.json").exists()  # nothing half-merged was published


def test_layout_differences_ignore_only_chunking() -> None:
    config = {"data_format": ["int"], "data_spec": "s", "compression": None, "chunk_size": 2, "types": None}
    assert layout_differences(config, {**config, "chunk_size": None, "chunk_bytes": 64, "types": {"a": 1}}) == []
    assert layout_differences(config, {**config, "compression": "zstd", "item_loader": "TokensLoader"}) == [
        "compression",
        "item_loader",
    ]
    assert layout_differences(config, {k: v for k, v in config.items() if k != "compression"}) == []
    framed = {**config, "compression": "zstd", "compression_level": "batch", "compression_batch_size": 256}
    assert layout_differences(framed, {**framed, "compression_batch_size": 8}) == []  # each chunk's frame table says
    assert layout_differences(framed, {**framed, "compression_level": "sample", "compression_batch_size": None}) == [
        "compression_level"
    ]


def test_merge_keeps_the_given_order_not_the_names() -> None:
    config = {"data_format": ["int"], "data_spec": None}
    existing = DatasetIndex([ChunkInfo("chunk-0-0.bin", 10, 2), ChunkInfo("chunk-1-0.bin", 10, 2)], config)
    appended = DatasetIndex([ChunkInfo("chunk-0-1.bin", 10, 2)], config)
    merged = merge_indexes([existing, appended], "out/index.json")
    # Name order would put chunk-0-1 second and renumber the existing dataset's samples.
    assert [c.filename for c in merged.chunks] == ["chunk-0-0.bin", "chunk-1-0.bin", "chunk-0-1.bin"]
