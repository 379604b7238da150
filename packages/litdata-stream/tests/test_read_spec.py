"""The reader against a chunk source of the test's own: it reads what its ``ReadSpec`` says, nothing of a dataset.

The source is an in-memory one (every chunk opened up front, each call recorded), handed to the reader
through the read state's per-process slot, where a dataset's reader finds the source it opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter, DatasetIndex, PyTreeLoader, load_index
from litdata_format.internal import Chunk, SampleMap
from litdata_format.serializers import resolve_serializers
from litdata_stream import litdata_collate
from litdata_stream._read import ReadSpec, ReadState, StreamingReader
from litdata_stream._sources.posix import PosixProfile
from litdata_stream._sources.source import ChunkOrigin
from litdata_stream._upstream_state import UpstreamOrder


class MemorySource:
    """A chunk source holding every chunk open, recording what the reader asks of it."""

    def __init__(self, folder: Path, index: DatasetIndex, loader: PyTreeLoader) -> None:
        self.index = index
        self._chunks = [loader.open_chunk(folder / info.filename, info, index, None) for info in index.chunks]
        self.scheduled: list[int] = []
        self.released: list[int] = []

    def schedule(self, chunks: list[int]) -> None:
        self.scheduled += chunks

    def chunk(self, number: int) -> Chunk:
        return self._chunks[number]

    def release(self, number: int) -> None:
        self.released.append(number)

    def close(self) -> None:
        self._chunks.clear()


def _state(tmp_path: Path, n: int = 12) -> tuple[ReadState, PyTreeLoader, MemorySource]:
    folder = tmp_path / "data"
    writer = BinaryWriter(folder, chunk_size=4)
    for i in range(n):
        writer.add_item(i, {"i": i})
    writer.done()
    writer.merge()
    index = load_index(folder)
    loader = PyTreeLoader()
    loader.setup(index, resolve_serializers(None), None)
    state = ReadState(ChunkOrigin(index, directory=folder), SampleMap(loader.item_counts(index)),
                      PosixProfile(True, None, None), sample_bytes=1.0)  # fmt: skip
    source = MemorySource(folder, index, loader)
    state.sources.get(lambda: source)  # this process's source: the reader finds it here
    return state, loader, source


def test_a_stretch_is_read_in_the_order_of_the_spec_from_the_source(tmp_path: Path) -> None:
    state, loader, source = _state(tmp_path)
    reader = StreamingReader(ReadSpec(state, loader, seed=7, shuffle=True))
    order = reader.epoch_order(2)
    got = [sample["i"] for sample in reader.read_stretch(order, [(0, 12)])]
    assert sorted(got) == list(range(12)) and got != list(range(12))
    chunks = [int(c) for c in order.chunk_order]
    assert source.scheduled == chunks and source.released == chunks  # hinted once, released after its piece
    for k, chunk in enumerate(chunks):  # each chunk's samples in the order's own order inside it
        assert got[4 * k : 4 * k + 4] == [4 * chunk + int(i) for i in order.within(chunk)]
    assert [sample["i"] for sample in reader.read_stretch(reader.epoch_order(2), [(0, 12)])] == got
    unshuffled = StreamingReader(ReadSpec(state, loader, seed=7, shuffle=False))
    assert [s["i"] for s in unshuffled.read_stretch(unshuffled.epoch_order(2), [(3, 9)])] == list(range(3, 9))


def test_transform_and_a_subclass_getitem_come_from_the_spec(tmp_path: Path) -> None:
    state, loader, _ = _state(tmp_path)
    plain = StreamingReader(ReadSpec(state, loader, seed=0, shuffle=False))
    transformed = StreamingReader(ReadSpec(state, loader, 0, False, transform=lambda s: s["i"] * 10))
    own = StreamingReader(ReadSpec(state, loader, 0, False, getitem=lambda i: ("own", i)))
    assert transformed.sample(5) == 50 and transformed.samples([11, 0]) == [110, 0] and transformed.sample(-1) == 110
    assert list(own.read_stretch(own.epoch_order(1), [(2, 5)])) == [("own", 2), ("own", 3), ("own", 4)]
    assert plain.gathers(litdata_collate) and not transformed.gathers(litdata_collate)
    assert not own.gathers(litdata_collate) and not plain.gathers(lambda batch: batch)
    assert plain.samples_per_chunk == [4, 4, 4] and plain.num_samples == 12


def test_a_failing_transform_keeps_its_type_and_names_the_sample(tmp_path: Path) -> None:
    state, loader, _ = _state(tmp_path)

    def broken(sample: Any) -> Any:
        raise ValueError("bad sample")

    reader = StreamingReader(ReadSpec(state, loader, 0, False, transform=broken))
    with pytest.raises(ValueError, match="bad sample") as caught:
        reader.sample(6)
    assert any("sample 6" in note and "item 2" in note for note in getattr(caught.value, "__notes__", []))


def test_the_reader_writes_nothing_into_the_state(tmp_path: Path) -> None:
    """An upstream order the dataset adopted is read from the state, never remembered there by the reader."""
    state, loader, _ = _state(tmp_path)
    state.upstream = (3, [1, 1, 1, False, 0])
    before = dict(vars(state))
    reader = StreamingReader(ReadSpec(state, loader, seed=5, shuffle=True))
    assert isinstance(reader.epoch_order(3), UpstreamOrder)
    assert not isinstance(reader.epoch_order(4), UpstreamOrder)
    list(reader.read_stretch(reader.epoch_order(3), [(0, 12)]))
    assert vars(state) == before
