"""Reading a dataset's samples: what a dataset hands its reader, and the reader.

A ``StreamingDataset`` keeps what it reads in one :class:`ReadState`. To read, it hands a
:class:`StreamingReader` a :class:`ReadSpec`: that state and the settings the reading follows. The
reader never sees the dataset: it opens the chunk source, orders an epoch, reads a stretch of it
sample by sample or a batch's share at a time, and reads the samples ``dataset[i]`` asks for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from litdata_format import BaseItemLoader
from litdata_format.internal import Chunk, SampleMap, add_note
from litdata_io.internal import PerProcess, probe
from litdata_stream._collate import Batching, litdata_collate
from litdata_stream._pass_plan import EpochOrder, Interval
from litdata_stream._shuffle import WindowOrder
from litdata_stream._sources.origin import open_source
from litdata_stream._sources.posix import PosixProfile
from litdata_stream._sources.source import ChunkOrigin, ChunkSource
from litdata_stream._takers import GatheringTaker, SampleTaker, Taker, reading
from litdata_stream._upstream_state import UpstreamOrder

__all__ = ["ReadSpec", "ReadState", "StreamingReader"]


@dataclass(eq=False)
class ReadState:
    """What a ``StreamingDataset`` reads, kept once on it (a copy or a subset has its own).

    ``upstream`` is (epoch, key) when that epoch reads upstream LitData's order (a loaded upstream
    state's); ``sources`` holds the chunk source of each process (a forked worker opens its own).
    """

    origin: ChunkOrigin
    samples: SampleMap
    posix: PosixProfile
    sample_bytes: float
    upstream: tuple[int, list[Any]] | None = None
    sources: PerProcess[ChunkSource] = field(default_factory=PerProcess)

    def copy(self, **changes: Any) -> ReadState:
        """A state of its own, with ``changes``: no chunk source opened yet."""
        return replace(self, **{"sources": PerProcess(), **changes})


class ReadSpec(NamedTuple):
    """What a dataset hands its reader: its read state and the settings the reading follows.

    A tuple, not a frozen dataclass: ``dataset[i]`` builds one per call, and a tuple is cheaper to build.
    ``getitem`` is a subclass's own ``__getitem__``, which then decides what sample ``i`` is.
    """

    state: ReadState
    item_loader: BaseItemLoader
    seed: int
    shuffle: bool
    transform: Callable[[Any], Any] | None = None
    getitem: Callable[[int], Any] | None = None


class StreamingReader:
    """Reads what a :class:`ReadSpec` describes: samples by index, stretches of an epoch, batches.

    ``dataset[i]`` builds one per call, so it is a slotted class (a frozen dataclass costs more to build).
    """

    __slots__ = ("spec",)

    def __init__(self, spec: ReadSpec) -> None:
        self.spec = spec

    @property
    def num_samples(self) -> int:
        """All samples of the dataset (after subsampling), across ranks."""
        return len(self.spec.state.samples)

    @property
    def sample_bytes(self) -> float:
        """Uncompressed bytes of one sample, about (the chunks' offset tables included)."""
        return self.spec.state.sample_bytes

    @property
    def samples_per_chunk(self) -> list[int]:
        """How many samples each chunk of the index gives (after subsampling, or in a subset)."""
        return np.asarray(self.spec.state.samples.lengths).tolist()

    def source(self) -> ChunkSource:
        """The chunk source in this process (one per process: a forked worker opens its own)."""
        return self.spec.state.sources.get(self._open_source)

    def _open_source(self) -> ChunkSource:
        return open_source(self.spec.state.origin, self.spec.item_loader.open_chunk)

    # -- samples by index (``dataset[i]``, ``__getitems__``, ``get_by_key``) ----------------------
    def sample(self, index: int) -> Any:
        """Global sample ``index`` (negative counts from the end), transformed."""
        samples = self.spec.state.samples
        chunk, position = samples.locate(index + len(samples) if index < 0 else index)
        return self._sample_at(self.source().chunk(chunk), chunk, position, index)

    def samples(self, indices: Sequence[int]) -> list[Any]:
        """Global samples ``indices`` (negative count from the end) in that order, each chunk opened once.

        Raises:
            IndexError: an index is outside the dataset.
        """
        samples, source = self.spec.state.samples, self.source()
        wanted = np.asarray(indices, dtype=np.int64).reshape(-1)
        total = len(samples)
        wanted = np.where(wanted < 0, wanted + total, wanted)
        bad = (wanted < 0) | (wanted >= total)
        if bad.any():
            first = int(np.asarray(indices).reshape(-1)[int(np.argmax(bad))])
            raise IndexError(f"sample {first} is out of range: the dataset has {total} samples")
        chunks, positions = samples.locate_many(wanted)
        order = np.argsort(chunks, kind="stable")
        out: list[Any] = [None] * len(wanted)
        rows = zip(order.tolist(), chunks[order].tolist(), positions[order].tolist(), wanted[order].tolist())
        for slot, chunk, position, index in rows:
            out[slot] = self._sample_at(source.chunk(chunk), chunk, position, index)
        return out

    def stored(self, position: int) -> Any:
        """The ``position``-th item of the index (what the key index records), kept by ``subsample`` or not."""
        chunk, item = self.spec.state.samples.locate_item(position)
        opened = self.source().chunk(chunk)
        return self._loaded(self.spec.item_loader.load(opened, item), position, opened, item)

    def _sample_at(self, opened: Any, chunk: int, position: int, index: int) -> Any:
        """Sample ``index``, the ``position``-th kept item of chunk ``chunk`` (``opened``), transformed."""
        item = self.spec.state.samples.item(chunk, position)
        return self._loaded(self.spec.item_loader.load(opened, item), index, opened, item)

    def _loaded(self, data: Any, index: int, chunk: Any, item: int) -> Any:
        """``data`` as the dataset gives it: through its ``transform``, if it has one."""
        return data if self.spec.transform is None else self._transformed(data, index, chunk, item)

    def _transformed(self, data: Any, index: int, chunk: Any, item: int) -> Any:
        """``transform(data)``; an error keeps its type (``except ValueError`` still works), noted with where."""
        try:
            return self.spec.transform(data)  # pyright: ignore[reportOptionalCall]
        except Exception as error:
            add_note(error, f"transform failed on sample {index} (chunk {getattr(chunk, 'name', '?')}, item {item})")
            raise

    # -- stretches of an epoch (a pass's share, and the mixing datasets' sub-dataset reads) -------
    def epoch_order(self, epoch: int) -> EpochOrder:
        """The order of the samples in a pass of ``epoch``."""
        spec = self.spec
        lengths, upstream, window = spec.state.samples.lengths, spec.state.upstream, spec.state.posix.window
        if upstream is not None and upstream[0] == epoch:
            return UpstreamOrder(lengths, spec.seed, epoch, spec.shuffle, upstream[1])
        if spec.shuffle and window is not None:
            return WindowOrder(lengths, spec.seed, epoch, window)
        return EpochOrder(lengths, spec.seed, epoch, spec.shuffle)

    def read_stretch(self, order: EpochOrder, intervals: Sequence[Interval]) -> Iterator[Any]:
        """The samples at ``intervals`` (half-open ranges of positions) of ``order``'s sequence, in that order."""
        pieces = order.pieces(intervals)
        source = self.source()
        source.schedule([p.chunk for p in pieces])
        spec, samples = self.spec, self.spec.state.samples
        getitem, load = spec.getitem, spec.item_loader.load  # a subclass's own __getitem__ decides what a sample is
        transform = None if spec.transform is None else self._transformed
        for piece in pieces:
            chunk = piece.chunk
            source.chunk(chunk)  # its item count checked against its header before its order is made
            within = order.within(chunk)[piece.lo : piece.hi]
            start = int(samples.starts[chunk])
            doing = partial(reading, source, chunk)
            reading_token = probe.begin("read", "read", doing, chunk=chunk, samples=len(within))
            if getitem is None:
                kept = samples.items(chunk)
                items = within.tolist() if kept is None else kept[within].tolist()
                for position, item in zip(within.tolist(), items):
                    with probe.span("sample", "sample", None, chunk=chunk, index=start + position):
                        opened = source.chunk(chunk)  # a dict lookup; no syscall, no lock
                        sample = load(opened, item)
                        if transform is not None:
                            sample = transform(sample, start + position, opened, item)
                    yield sample
            else:
                for position in within.tolist():
                    with probe.span("sample", "sample", None, chunk=chunk, index=start + position):
                        sample = getitem(start + position)
                    yield sample
            probe.end(reading_token)
            source.release(chunk)

    def read_batches(self, order: EpochOrder, intervals: Sequence[Interval], batching: Batching) -> Iterator[Any]:
        """The batches the DataLoader would make of :meth:`read_stretch`, fixed-size samples gathered per leaf."""
        size = batching.batch_size
        taker = self.stretch_taker(order, intervals, batching.collate)
        while True:
            parts, count = taker.take(size)
            if not count or (batching.drop_last and count < size):
                return
            yield batching.of_parts(parts)

    def stretch_taker(
        self, order: EpochOrder, intervals: Sequence[Interval], collate: Callable[[list[Any]], Any]
    ) -> Taker:
        """Takes the samples at ``intervals`` of ``order`` a batch's share at a time (gathered if :meth:`gathers`)."""
        if self.gathers(collate):
            loader = self.spec.item_loader
            return GatheringTaker(self.source(), order, intervals, self.spec.state.samples, self._gathered, loader)
        return SampleTaker(self.read_stretch(order, intervals))

    def gathers(self, collate: Callable[[list[Any]], Any]) -> bool:
        """Whether batches made with ``collate`` may be gathered as arrays.

        Only with the default collate, and samples exactly what the item loader reads (no transform or ``__getitem__``).
        """
        spec = self.spec
        return (
            collate is litdata_collate
            and spec.getitem is None
            and spec.transform is None
            and type(spec.item_loader).gather is not BaseItemLoader.gather
        )

    def _gathered(self, chunk: Chunk, items: np.ndarray) -> Any:
        """Items of one chunk as arrays, or as a list of samples when they are not laid out alike."""
        loader = self.spec.item_loader
        found = loader.gather(chunk, items)
        if found is None:
            return [loader.load(chunk, item) for item in items.tolist()]
        return found
