"""Small chunks' rows read straight from their files (``SmallChunkRows``): exactly the rows that
opening each chunk and gathering from it gives, and whatever does not qualify left to the opener."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from litdata_format import BinaryWriter, DatasetReader, TokensLoader
from litdata_format.internal import small_chunk_rows


def _write(path: Path, samples: list[Any], reader: Any = None, **kwargs: Any) -> DatasetReader:
    writer = BinaryWriter(path, **kwargs)
    for i, sample in enumerate(samples):
        writer.add_item(i, sample)
    writer.done()
    writer.merge()
    return DatasetReader(path, item_loader=reader)


def _records(n: int) -> list[dict[str, Any]]:
    return [{"i": i, "x": np.arange(4, dtype=np.int32) + i} for i in range(n)]


def _gathered(reader: DatasetReader, pieces: list[tuple[int, list[int]]]) -> dict[str, np.ndarray]:
    """The same pieces gathered chunk by chunk from opened chunks (the usual way), joined."""
    parts = [reader.item_loader.gather(reader.chunk(n), np.array(items)) for n, items in pieces]
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def test_rows_read_from_the_files_are_the_gathered_ones(tmp_path: Path) -> None:
    reader = _write(tmp_path / "d", _records(40), chunk_size=4)
    rows = small_chunk_rows(reader.item_loader, str(tmp_path / "d"), reader.index)
    assert rows is not None
    assert not rows.read(0, [1, 2])  # no layout learned yet: the usual gather learns it
    reader.item_loader.gather(reader.chunk(0), np.array([0]))
    pieces = [(3, [2, 0]), (5, [1]), (3, [3]), (9, [0, 1, 2, 3])]
    for number, items in pieces:
        assert rows.read(number, items)
    assert rows.pending
    part, read = rows.flush()
    assert read == pieces and not rows.pending
    expected = _gathered(reader, pieces)
    assert part.keys() == expected.keys()
    for key in part:
        assert part[key].dtype == expected[key].dtype and np.array_equal(part[key], expected[key])
        assert part[key].flags.writeable
    assert part["i"].tolist() == [14, 12, 21, 15, 36, 37, 38, 39]


def test_what_does_not_qualify_is_left_to_the_opener(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    reader = _write(folder, _records(40), chunk_size=4)
    reader.item_loader.gather(reader.chunk(0), np.array([0]))
    names = reader.index.table.filenames
    # A corrupt offsets table: the opener names the file.
    corrupt = folder / names[2]
    data = bytearray(corrupt.read_bytes())
    data[4] ^= 1
    corrupt.write_bytes(bytes(data))
    # A link to a copy in the folder: read through the opener, which checks where it leads.
    linked = folder / names[4]
    os.replace(linked, folder / "copy.bin")
    linked.symlink_to("copy.bin")
    # A byte appended: the file no longer has the size index.json gives.
    with open(folder / names[5], "ab") as handle:
        handle.write(b"\0")
    (folder / names[6]).unlink()
    rows = small_chunk_rows(reader.item_loader, str(folder), reader.index)
    assert rows is not None
    for number in (2, 4, 5, 6):
        assert not rows.read(number, [0]), number
    assert not rows.read(7, [4]) and not rows.read(7, [-1])  # items out of range
    assert rows.read(7, [3]) and rows.read(8, [0])
    with pytest.raises(ValueError, match="offsets table is corrupt"):
        reader.chunk(2)
    assert reader.item_loader.gather(reader.chunk(4), np.array([1]))["i"].tolist() == [17]


def test_a_batch_breaking_its_layout_comes_back_for_the_usual_gather(tmp_path: Path) -> None:
    # Rows of one size whose leaves split it otherwise from sample 8 on (x of 4 and y of 2, then 2 and 4).
    samples = [
        {"i": i, "x": np.full(4 if i < 8 else 2, i, dtype=np.int32), "y": np.full(2 if i < 8 else 4, i, dtype=np.int32)}
        for i in range(16)
    ]
    reader = _write(tmp_path / "d", samples, chunk_size=4)
    reader.item_loader.gather(reader.chunk(0), np.array([0]))
    rows = small_chunk_rows(reader.item_loader, str(tmp_path / "d"), reader.index)
    assert rows is not None
    assert rows.read(1, [0, 1]) and rows.read(2, [3])
    part, pieces = rows.flush()
    assert part is None and pieces == [(1, [0, 1]), (2, [3])]
    assert reader.item_loader.gather(reader.chunk(2), np.array([3]))["x"].shape == (1, 2)  # it learns the other
    # The layout of a row size is the latest learned: rows of the other one go back again.
    assert rows.read(3, [2]) and rows.flush()[0]["i"].tolist() == [14]
    assert rows.read(1, [2]) and rows.flush()[0] is None


def test_rows_of_another_size_wait_for_the_next_flush(tmp_path: Path) -> None:
    samples = [{"i": i, "x": np.arange(3 + i // 4, dtype=np.int64)} for i in range(12)]
    reader = _write(tmp_path / "d", samples, chunk_size=4)
    for number in range(3):
        reader.item_loader.gather(reader.chunk(number), np.array([0]))
    rows = small_chunk_rows(reader.item_loader, str(tmp_path / "d"), reader.index)
    assert rows is not None
    assert rows.read(0, [1]) and not rows.read(1, [1])
    assert rows.flush()[0]["x"].shape == (1, 3)
    assert rows.read(1, [1]) and rows.flush()[0]["x"].tolist() == [[0, 1, 2, 3]]


@pytest.mark.parametrize(
    "case",
    ["tokens", "compressed", "big", "text", "sample_compression"],
)
def test_datasets_it_does_not_read(tmp_path: Path, case: str) -> None:
    path = tmp_path / case
    if case == "tokens":
        docs = [np.arange(10, dtype=np.int32)] * 4
        reader = _write(path, docs, TokensLoader(block_size=5), chunk_size=20, item_loader=TokensLoader())
    elif case == "compressed":
        reader = _write(path, _records(8), chunk_size=4, compression="zstd")
    elif case == "big":
        reader = _write(path, [{"i": i, "x": np.zeros(20_000, dtype=np.int32)} for i in range(4)], chunk_size=1)
    elif case == "text":
        reader = _write(path, [{"i": i, "name": f"n{i}", "x": np.zeros(2)} for i in range(8)], chunk_size=4)
    else:
        reader = _write(path, _records(8), chunk_size=4, compression="zstd", compression_level="sample")
    assert small_chunk_rows(reader.item_loader, str(path), reader.index) is None
