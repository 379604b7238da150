"""The read stack's owners: the sample map, the chunk opener and the columnar chunk table."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from litdata_format import BinaryWriter, ChunkInfo, DatasetReader, load_index, parse_index
from litdata_format._index._dataset_index import ChunkTable
from litdata_format.internal import ChunkOpener, SampleMap


def test_locate_walks_the_prefix_sums() -> None:
    samples = SampleMap([3, 0, 2, 4])
    assert len(samples) == 9 and samples.keeps_all
    assert [samples.locate(i) for i in (0, 2, 3, 4, 5, 8)] == [(0, 0), (0, 2), (2, 0), (2, 1), (3, 0), (3, 3)]
    assert samples.item(3, 2) == 2 and samples.items(3) is None
    with pytest.raises(IndexError, match="sample 9 is out of range"):
        samples.locate(9)
    chunks, positions = samples.locate_many(np.array([8, 0, 4]))
    assert chunks.tolist() == [3, 0, 2] and positions.tolist() == [3, 0, 1]


def test_kept_items_renumber_the_samples_but_not_the_stored_items() -> None:
    samples = SampleMap([3, 2, 4], [np.array([2, 0]), None, np.array([], dtype=np.int64)])
    assert len(samples) == 4 and not samples.keeps_all
    assert samples.lengths.tolist() == [2, 2, 0]
    assert [samples.locate(i) for i in range(4)] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [samples.item(*samples.locate(i)) for i in range(4)] == [2, 0, 0, 1]
    # A key names a stored item whatever is kept.
    assert samples.locate_item(5) == (2, 0)
    with pytest.raises(IndexError, match="item 9"):
        samples.locate_item(9)
    with pytest.raises(ValueError, match="chunk 0"):
        SampleMap([3], [np.array([3])])


def test_subset_keeps_each_chunks_chosen_items() -> None:
    samples = SampleMap([3, 2, 4], [np.array([2, 0, 1]), None, None])
    sub = samples.subset(np.array([1, 2, 5, 8]))
    assert sub.lengths.tolist() == [2, 0, 2]
    assert [sub.item(*sub.locate(i)) for i in range(len(sub))] == [0, 1, 0, 3]


def test_a_map_pickles_as_arrays() -> None:
    samples = SampleMap(np.full(1000, 4), [None] * 999 + [np.array([1])])
    back = pickle.loads(pickle.dumps(samples))
    assert len(back) == len(samples) == 3997 and back.locate(3996) == (999, 0) and back.item(999, 0) == 1


class _Fake:
    def __init__(self, number: int, count: int, log: list[Any]) -> None:
        self.name, self.views, self._count, self._log = f"chunk-{number}", {"rows": 1}, count, log

    def __len__(self) -> int:
        return self._count

    def item(self, index: int) -> memoryview:
        return memoryview(b"")

    def payload(self) -> memoryview:
        return memoryview(b"")

    def close(self) -> None:
        self.views.clear()
        self._log.append(("close", self.name))


def _opener(
    log: list[Any], counts: list[int], keep_open: int | None, holds: dict[int, int] | None = None
) -> ChunkOpener:
    def open_file(number: int) -> Any:
        log.append(("open", number))
        return _Fake(number, (holds or {}).get(number, counts[number]), log)

    return ChunkOpener(lambda n: f"chunk-{n}.bin", np.array(counts), open_file, keep_open,
                       lambda n, consumed: log.append(("closed", n, consumed)))  # fmt: skip


def test_the_opener_keeps_the_latest_few_open_and_closes_the_rest() -> None:
    log: list[Any] = []
    opener = _opener(log, [2, 2, 2], keep_open=2)
    first = opener.chunk(0)
    assert opener.chunk(0) is first and log == [("open", 0)]  # kept open: opened once
    opener.chunk(1)
    opener.chunk(0)  # now the most recently used
    opener.chunk(2)  # pushes out chunk 1, not chunk 0
    assert opener.open_numbers == (0, 2) and not opener.is_open(1)
    assert ("close", "chunk-1") in log and ("closed", 1, False) in log
    opener.release(2)
    assert log[-1] == ("closed", 2, True) and opener.open_numbers == (0,)
    opener.release(2)  # not open: nothing happens
    opener.close()
    assert opener.open_numbers == () and log[-1] == ("closed", 0, False) and first.views == {}


def test_the_opener_checks_the_item_count_and_closes_a_chunk_that_fails() -> None:
    log: list[Any] = []
    opener = _opener(log, [2, 3], keep_open=None, holds={1: 5})
    opener.chunk(0)
    with pytest.raises(ValueError, match=r"chunk chunk-1: holds 5 items but index.json says 3 \(chunk-1.bin\)"):
        opener.chunk(1)
    assert log[-2:] == [("close", "chunk-1"), ("closed", 1, False)] and opener.open_numbers == (0,)
    with pytest.raises(ValueError, match="keep_open"):
        _opener(log, [1], keep_open=0)


def _dataset(folder: Path, count: int = 10, chunk_size: int = 3) -> Path:
    writer = BinaryWriter(folder, chunk_size=chunk_size)
    for i in range(count):
        writer.add_item(i, {"i": i, "x": np.full(2, i, dtype=np.int32)})
    writer.done()
    writer.merge()
    return folder


def test_an_index_is_kept_as_columns_and_still_reads_as_entries(tmp_path: Path) -> None:
    index = load_index(_dataset(tmp_path / "d"))
    table = index.table
    assert isinstance(index.chunks, ChunkTable) and len(table) == 4
    assert table.chunk_sizes.tolist() == [3, 3, 3, 1] and table.dims.tolist() == [-1] * 4
    assert table.filenames == [f"chunk-0-{n}.bin" for n in range(4)] and table.filename(3) == "chunk-0-3.bin"
    entry = index.chunks[-1]
    assert entry == ChunkInfo("chunk-0-3.bin", entry.chunk_bytes, 1, None, entry.extra) and "checksum" in entry.extra
    assert list(index.chunks) == table[0:4] and index.chunks == list(index.chunks)
    assert pickle.loads(pickle.dumps(index)).chunks == index.chunks
    # Entries of different shapes are checked one by one and stored alike.
    mixed = parse_index({"chunks": [{"filename": "a.bin", "chunk_bytes": 5, "chunk_size": 1},
                                    {"chunk_size": 2, "filename": "b/c.bin", "chunk_bytes": 7, "dim": 4, "k": [1]}],
                         "config": {"data_format": [], "data_spec": None}})  # fmt: skip
    assert [c.to_json() for c in mixed.chunks] == [
        {"chunk_bytes": 5, "chunk_size": 1, "dim": None, "filename": "a.bin"},
        {"chunk_bytes": 7, "chunk_size": 2, "dim": 4, "filename": "b/c.bin", "k": [1]},
    ]


@pytest.mark.parametrize("name", ["../x.bin", ".hidden.bin", "a//b.bin", "a\\b.bin", ""])
def test_the_column_check_refuses_what_the_entry_check_refuses(name: str) -> None:
    entries = [{"filename": "ok.bin", "chunk_bytes": 1, "chunk_size": 1}, {"filename": name, "chunk_bytes": 1,
                                                                         "chunk_size": 1}]  # fmt: skip
    with pytest.raises(ValueError, match=r"chunks\[1\]"):
        parse_index({"chunks": entries, "config": {"data_format": [], "data_spec": None}}, "here/index.json")


def test_the_reader_maps_and_opens_through_the_owners(tmp_path: Path) -> None:
    reader = DatasetReader(_dataset(tmp_path / "d"))
    assert len(reader) == 10 and reader.locate(9) == (3, 0)
    assert [reader[i]["i"] for i in (0, 4, 9)] == [0, 4, 9]
    assert reader.samples.lengths.tolist() == [3, 3, 3, 1]
    reader.close()
    assert reader[5]["i"] == 5  # reopened on demand after close
