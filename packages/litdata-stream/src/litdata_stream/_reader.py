"""A ``StreamingDataset``'s reader: what reads its samples, its stretches and its passes.

A ``StreamingDataset`` shows its users only its user API and keeps what is read in one
:class:`ReadState` (where the chunks are, the sample map, the chunk source of this process, the
order a loaded upstream state dict asks for). The reading is this module's: a
:class:`StreamingReader`, the dataset's :class:`PassReader` (a frozen value over the dataset),
opens the chunk source, orders an epoch, reads a stretch of it sample by sample or a batch's share
at a time (gathered as arrays where it may), and reads the samples ``dataset[i]`` asks for. The
mixing datasets read their sub-datasets through it too. The dataset keeps the plan of a pass and
its resume point; its pass hands the reader the stretch to read.

The dataset's side is :class:`ReadOwner`: the one private field (``_read``) a reader reads. Its
user API (``shuffle``, ``seed``, ``item_loader``, ``transform``, ``samples_are_items``, ``__getitem__``)
the reader reads as any caller would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from litdata_format import BaseItemLoader
from litdata_format.internal import Chunk, SampleMap, add_note
from litdata_io.internal import PerProcess, probe
from litdata_stream._collate import Batching, litdata_collate
from litdata_stream._fetch import fetch_many
from litdata_stream._origin import open_source
from litdata_stream._plan import EpochOrder, Interval
from litdata_stream._posix import PosixProfile
from litdata_stream._protocol import EpochsOwner, PassReader
from litdata_stream._shuffle import WindowOrder
from litdata_stream._source import ChunkOrigin, ChunkSource
from litdata_stream._takers import GatheringTaker, SampleTaker, Taker, reading
from litdata_stream._upstream_state import UpstreamOrder, UpstreamResume, upstream_resume

if TYPE_CHECKING:
    from litdata_stream._dataset import StreamingDataset

__all__ = ["ReadOwner", "ReadState", "StreamingReader", "dataset_label"]


@dataclass(eq=False)
class ReadState:
    """What a ``StreamingDataset`` reads, kept once on it (a copy or a subset has its own).

    Attributes:
        origin: the parsed index, where the chunks are, and the options a chunk source needs.
        samples: the sample map: which items of each chunk are kept, and their prefix sums.
        posix: the local file system's profile (the shuffle window it calls for).
        sample_bytes: uncompressed bytes per sample, about (the chunks' offset tables included).
        transformed: whether samples go through the dataset's ``transform``.
        upstream: (epoch, key): that epoch reads upstream LitData's order (a loaded upstream state's).
        sources: the chunk source of each process (a forked worker opens its own).
        upstream_order: the order ``upstream`` names, built on first use (never copied).
    """

    origin: ChunkOrigin
    samples: SampleMap
    posix: PosixProfile
    sample_bytes: float
    transformed: bool
    upstream: tuple[int, list[Any]] | None = None
    sources: PerProcess[ChunkSource] = field(default_factory=PerProcess)
    upstream_order: UpstreamOrder | None = None

    def copy(self, **changes: Any) -> ReadState:
        """A state of its own, with ``changes``: no chunk source opened yet, no order built."""
        return replace(self, **{"sources": PerProcess(), "upstream_order": None, **changes})


@dataclass(frozen=True, eq=False)
class StreamingReader(PassReader):
    """A ``StreamingDataset``'s :class:`PassReader`: the loader protocol, and the read machinery.

    ``CombinedStreamingDataset`` and ``ParallelStreamingDataset`` read their sub-datasets'
    stretches through it (``StreamingReader(dataset)``); the dataset reads its samples through it.
    """

    dataset: StreamingDataset

    @property
    def _state(self) -> ReadState:
        return self.dataset._read

    @property
    def num_samples(self) -> int:
        """All samples of the dataset (after subsampling), across ranks."""
        return len(self._state.samples)

    @property
    def sample_bytes(self) -> float:
        """Uncompressed bytes of one sample, about (the chunks' offset tables included)."""
        return self._state.sample_bytes

    @property
    def samples_per_chunk(self) -> list[int]:
        """How many samples each chunk of the index gives (after subsampling, or in a subset)."""
        return np.asarray(self._state.samples.lengths).tolist()

    def source(self) -> ChunkSource:
        """The dataset's chunk source in this process (one per process: a forked worker opens its own)."""
        return self._state.sources.get(self._open_source)

    def _open_source(self) -> ChunkSource:
        return open_source(self._state.origin, self.dataset.item_loader.open_chunk)

    # -- samples by index (``dataset[i]``, ``__getitems__``, ``get_by_key``) ----------------------
    def sample(self, index: int) -> Any:
        """Sample ``index`` (negative counts from the end), transformed.

        Args:
            index: A global sample index of the dataset.
        """
        state = self._state
        samples = state.samples
        chunk, position = samples.locate(index + len(samples) if index < 0 else index)
        opened = state.sources.get(self._open_source).chunk(chunk)
        item = samples.item(chunk, position)
        data = self.dataset.item_loader.load(opened, item)
        return self._transformed(data, index, opened, item) if state.transformed else data

    def samples(self, indices: Sequence[int]) -> list[Any]:
        """Samples ``indices``, each chunk opened once, in the order asked for.

        Args:
            indices: Global sample indexes of the dataset (negative ones count from the end).
        """
        return fetch_many(indices, self._state.samples, self.source(), self._sample_at)

    def stored(self, position: int) -> Any:
        """The ``position``-th item stored in the dataset, kept by ``subsample`` or not, transformed.

        Args:
            position: The item's position among every item of the index (what the key index records).
        """
        chunk, item = self._state.samples.locate_item(position)
        opened = self.source().chunk(chunk)
        return self._loaded(self.dataset.item_loader.load(opened, item), position, opened, item)

    def _sample_at(self, opened: Any, chunk: int, position: int, index: int) -> Any:
        """Sample ``index``, the ``position``-th kept item of chunk ``chunk`` (``opened``), transformed."""
        item = self._state.samples.item(chunk, position)
        return self._loaded(self.dataset.item_loader.load(opened, item), index, opened, item)

    def _loaded(self, data: Any, index: int, chunk: Any, item: int) -> Any:
        """``data`` as the dataset gives it: through its ``transform``, if it has one."""
        return self._transformed(data, index, chunk, item) if self._state.transformed else data

    def _transformed(self, data: Any, index: int, chunk: Any, item: int) -> Any:
        """``transform(data)``; an error keeps its type (``except ValueError`` still works), noted with where."""
        try:
            return self.dataset.transform(data)
        except Exception as error:
            add_note(error, f"transform failed on sample {index} (chunk {getattr(chunk, 'name', '?')}, item {item})")
            raise

    # -- stretches of an epoch (a pass's share, and the mixing datasets' sub-dataset reads) -------
    def epoch_order(self, epoch: int) -> EpochOrder:
        """The order of the samples in a pass of ``epoch``.

        Args:
            epoch: The epoch of the pass (with ``seed``, it picks the shuffled order).
        """
        state, dataset = self._state, self.dataset
        lengths = state.samples.lengths
        upstream = state.upstream
        if upstream is not None and upstream[0] == epoch:
            found = state.upstream_order
            if found is None or found.epoch != epoch or found.key != upstream[1]:
                found = state.upstream_order = UpstreamOrder(lengths, dataset.seed, epoch, dataset.shuffle, upstream[1])
            return found
        window = state.posix.window
        if dataset.shuffle and window is not None:
            return WindowOrder(lengths, dataset.seed, epoch, window)
        return EpochOrder(lengths, dataset.seed, epoch, dataset.shuffle)

    def adopt_upstream_order(self, state: dict[str, Any]) -> UpstreamResume:
        """Read the epoch of upstream's ``state`` in upstream's order; what the state says.

        Args:
            state: The state dict of an upstream LitData ``StreamingDataset``.

        Returns:
            The resume point that state describes.
        """
        dataset = self.dataset
        where = dataset_label(dataset)
        lengths = self._state.samples.lengths.tolist()
        found = upstream_resume(state, where, lengths, dataset.shuffle, dataset.seed)
        self._state.upstream = (found.epoch, found.order_key())
        return found

    def read_stretch(self, order: EpochOrder, intervals: Sequence[Interval]) -> Iterator[Any]:
        """The samples at ``intervals`` of ``order``'s sequence, in that order.

        Args:
            order: The order of the samples in the pass (from :meth:`epoch_order`).
            intervals: Half-open ranges of positions in that order, read in the order given.
        """
        pieces = order.pieces(intervals)
        source = self.source()
        source.schedule([p.chunk for p in pieces])
        dataset, samples = self.dataset, self._state.samples
        # A subclass overriding __getitem__ decides what a sample is; otherwise read directly.
        direct = dataset.samples_are_items
        load = dataset.item_loader.load
        transform = self._transformed if self._state.transformed else None
        for piece in pieces:
            chunk = piece.chunk
            source.chunk(chunk)  # its item count checked against its header before its order is made
            within = order.within(chunk)[piece.lo : piece.hi]
            start = int(samples.starts[chunk])
            doing = partial(reading, source, chunk)
            reading_token = probe.begin("read", "read", doing, chunk=chunk, samples=len(within))
            if direct:
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
                        sample = dataset[start + position]
                    yield sample
            probe.end(reading_token)
            source.release(chunk)

    def read_batches(self, order: EpochOrder, intervals: Sequence[Interval], batching: Batching) -> Iterator[Any]:
        """What :meth:`read_stretch` yields, already grouped into collated batches.

        A StreamingDataLoader has its workers do this, so a batch of fixed-size samples is read with one
        gather per leaf instead of a decode per sample. The batches are exactly those the DataLoader would
        have made from :meth:`read_stretch`.

        Args:
            order: The order of the samples in the pass (from :meth:`epoch_order`).
            intervals: Half-open ranges of positions in that order, read in the order given.
            batching: How batches are made (size, collate, ``drop_last``, their form).
        """
        size, collate = batching.batch_size, batching.collate
        taker = self.stretch_taker(order, intervals, collate)
        while True:
            parts, count = taker.take(size)
            if not count or (batching.drop_last and count < size):
                return
            yield batching.of_parts(parts)

    def stretch_taker(
        self, order: EpochOrder, intervals: Sequence[Interval], collate: Callable[[list[Any]], Any]
    ) -> Taker:
        """Takes the samples at ``intervals`` of ``order`` a batch's share at a time.

        They are gathered as arrays where :meth:`gathers`, else read one by one.

        Args:
            order: The order of the samples in the pass (from :meth:`epoch_order`).
            intervals: Half-open ranges of positions in that order, read in the order given.
            collate: The function that makes a batch of samples (the loader's ``collate_fn``).
        """
        if self.gathers(collate):
            return GatheringTaker(
                self.source(), order, intervals, self._state.samples, self._gathered, self.dataset.item_loader
            )
        return SampleTaker(self.read_stretch(order, intervals))

    def gathers(self, collate: Callable[[list[Any]], Any]) -> bool:
        """Whether batches made with ``collate`` may be gathered as arrays.

        They may with the default collate, and samples that are exactly what the item loader reads (no
        transform, no overridden ``__getitem__``).

        Args:
            collate: The function that makes a batch of samples (the loader's ``collate_fn``); only the
                default :func:`litdata_collate` lets batches be gathered.
        """
        dataset = self.dataset
        return (
            collate is litdata_collate
            and dataset.samples_are_items
            and not self._state.transformed
            and type(dataset.item_loader).gather is not BaseItemLoader.gather
        )

    def _gathered(self, chunk: Chunk, items: np.ndarray) -> Any:
        """Items of one chunk as arrays, or as a list of samples when they are not laid out alike."""
        loader = self.dataset.item_loader
        found = loader.gather(chunk, items)
        if found is None:
            return [loader.load(chunk, item) for item in items.tolist()]
        return found


class ReadOwner(EpochsOwner):
    """The dataset's side of a :class:`StreamingReader`: it keeps a :class:`ReadState`.

    ``StreamingDataset`` is one; the read state is the one private field its reader reads.
    """

    _read: ReadState
    _reader_class: ClassVar[type[PassReader]] = StreamingReader


def dataset_label(dataset: Any) -> str:
    """A dataset as messages name it: ``StreamingDataset('s3://bucket/data')`` (its URL, else its folder)."""
    return f"StreamingDataset({dataset.input_dir.url or dataset.input_dir.path!r})"
