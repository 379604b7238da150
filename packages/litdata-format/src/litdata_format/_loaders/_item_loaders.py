"""Item loaders: how samples are laid out inside chunks, on both the writing and the reading side.

``PyTreeLoader`` stores one sample per item (the default). ``TokensLoader`` stores 1-D token
arrays back to back and reads fixed-size blocks across them, for LLM pre-training. The loader's
class name is written to ``config.item_loader`` and checked when a dataset is opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from litdata_format._chunks._chunk import Chunk
from litdata_format._chunks._layouts import open_chunk
from litdata_format._chunks._mds import MdsSampleDecoder, is_mds_index
from litdata_format._index._dataset_index import ChunkInfo, DatasetIndex
from litdata_format._loaders._gather import SmallChunkRows, gather_rows
from litdata_format._samples._encode import SampleDecoder, SampleEncoder
from litdata_format._samples._pytree import LEAF
from litdata_format._samples._serializers import (
    Serializer,
    numpy_dtype,
    suffix_int,
    torch_dtype,
    torch_if_loaded,
)
from litdata_format._samples._trust import check_pickle_allowed

__all__ = ["BaseItemLoader", "PyTreeLoader", "TokensLoader", "small_chunk_rows"]


class BaseItemLoader:
    """The interface both sides of the format use; subclasses are named in ``config.item_loader``."""

    def __init__(self) -> None:
        self._serializers: Mapping[str, Serializer] = {}

    @property
    def name(self) -> str:
        """The loader's class name, as ``index.json`` records it in ``config.item_loader``."""
        return type(self).__name__

    # -- writing --------------------------------------------------------------------------------
    def start_writing(self, serializers: Mapping[str, Serializer]) -> None:
        """Prepare to :meth:`encode` samples with ``serializers`` (name -> serializer, in the order tried).

        Args:
            serializers: the serializers a leaf may be stored with; the first that accepts it wins.
        """
        self._encoder = SampleEncoder(serializers)

    def encode(self, sample: Any, index: int) -> tuple[bytes, int]:
        """The item bytes of ``sample`` and how much of ``chunk_size`` it uses.

        Args:
            sample: the sample to store.
            index: its position in the dataset, for error messages.
        """
        raise NotImplementedError

    def written_config(self) -> dict[str, Any]:
        """``data_format`` and ``data_spec`` for the index, once a sample was written."""
        spec = self._encoder.spec
        return {"data_format": self._encoder.data_format, "data_spec": spec.to_json() if spec else None}

    def resume_writing(self, written: Mapping[str, Any]) -> None:
        """Go on storing samples as another writer's first sample fixed (its :meth:`written_config`).

        Args:
            written: the other loader's :meth:`written_config`; nothing is fixed when its ``data_spec`` is None.
        """
        if written.get("data_spec") is not None:
            self._encoder.resume(written["data_format"], written["data_spec"])

    def chunk_dim(self, weights: list[int]) -> int | None:
        """The ``dim`` of a chunk entry given its items' weights.

        Args:
            weights: what :meth:`encode` returned for each item of the chunk.
        """
        return None

    # -- reading --------------------------------------------------------------------------------
    def setup(
        self, index: DatasetIndex, serializers: Mapping[str, Serializer], allow_pickle: bool | None = None
    ) -> None:
        """Prepare to read the dataset described by ``index``.

        Every reader sets its loader up here, so this is where a dataset whose leaves would be
        unpickled is refused unless ``allow_pickle`` (or ``LITDATA_ALLOW_PICKLE``) allows it.

        Args:
            index: the dataset's index.
            serializers: the serializers by name, to decode leaves with.
            allow_pickle: whether leaves may be unpickled; None reads ``LITDATA_ALLOW_PICKLE``.
        """
        check_pickle_allowed(index, serializers, allow_pickle)
        if index.item_loader != self.name:
            raise ValueError(
                f"{index.source}: the dataset was written with {index.item_loader}, but it is being read "
                f"with {self.name}; pass item_loader={index.item_loader}(...)"
            )
        self._serializers = serializers

    def items_in_chunk(self, chunk: ChunkInfo) -> int:
        """How many samples this loader yields from ``chunk``.

        Args:
            chunk: the chunk's entry in the index.
        """
        return chunk.chunk_size

    def item_counts(self, index: DatasetIndex) -> np.ndarray:
        """:meth:`items_in_chunk` of every chunk of ``index``, as an int64 array (without building entries).

        Args:
            index: the dataset's index.
        """
        if type(self).items_in_chunk is BaseItemLoader.items_in_chunk:
            return index.table.chunk_sizes
        return np.fromiter((self.items_in_chunk(c) for c in index.chunks), dtype=np.int64, count=len(index.chunks))

    def open_chunk(self, path: str | os.PathLike[str], info: ChunkInfo, index: DatasetIndex,
                   encryption: Any = None) -> Chunk:  # fmt: skip
        """Open the chunk file at ``path`` for :meth:`load`.

        Readers call this, never ``open_chunk`` directly, so a loader whose chunks are not LitData
        chunk files decides how to open them.

        Args:
            path: the chunk file.
            info: the chunk's entry in ``index``.
            index: the dataset's index.
            encryption: the decryption to apply, when the dataset is encrypted.
        """
        return open_chunk(path, info, index, encryption)

    def load(self, chunk: Chunk, index: int) -> Any:
        """Sample ``index`` (counted inside the chunk).

        Args:
            chunk: the opened chunk.
            index: the sample's position in the chunk.
        """
        raise NotImplementedError

    def gather(self, chunk: Chunk, items: np.ndarray) -> Any:
        """Samples ``items`` (positions inside ``chunk``) as arrays, or None to read them one by one.

        The result has the sample's structure with one array per leaf whose first dimension is
        ``len(items)`` (what stacking the samples' leaves gives).

        Args:
            chunk: the opened chunk.
            items: the samples' positions in the chunk.
        """
        return None


class PyTreeLoader(BaseItemLoader):
    """One sample per item: a pytree of leaves, each stored by its serializer."""

    def encode(self, sample: Any, index: int) -> tuple[bytes, int]:
        return self._encoder.encode(sample, index), 1

    def setup(
        self, index: DatasetIndex, serializers: Mapping[str, Serializer], allow_pickle: bool | None = None
    ) -> None:
        super().setup(index, serializers, allow_pickle)
        self._decoder: SampleDecoder | MdsSampleDecoder
        self._layouts: dict[int, Any] = {}  # the gathered rows' layouts, by row size: one dataset's chunks share them
        if is_mds_index(index):
            self._decoder = MdsSampleDecoder(index)
        elif not index.chunks and index.config.get("data_spec") is None:
            return  # an empty dataset (no sample was ever written): nothing to decode
        else:
            try:
                self._decoder = SampleDecoder(index.data_format, index.config["data_spec"], serializers, index.source)
            except (ValueError, TypeError, KeyError, IndexError, RecursionError) as err:
                if isinstance(err, ValueError) and str(index.source) in str(err):
                    raise  # already names the index file and what is wrong
                raise ValueError(
                    f"{index.source}: config.data_spec / config.data_format cannot be read: {err}"
                ) from None

    def load(self, chunk: Chunk, index: int) -> Any:
        rows = getattr(chunk, "sample", None)
        if rows is not None:  # layouts that store decoded rows (Arrow IPC) hand the sample over
            return rows(index)
        return self._decoder.decode(chunk.item(index), f"chunk {chunk.name}, item {index}")

    def gather(self, chunk: Chunk, items: np.ndarray) -> Any:
        decoder = self._decoder
        if not isinstance(decoder, SampleDecoder):
            return None
        return gather_rows(
            chunk, items, decoder.spec, decoder.serializers, lambda opened: self.load(opened, 0), self._layouts
        )


def small_chunk_rows(loader: BaseItemLoader, folder: str, index: DatasetIndex) -> SmallChunkRows | None:
    """A reader of small chunks' rows straight from their files (:class:`SmallChunkRows`), if ``loader`` allows it.

    Only for the format's own :class:`PyTreeLoader` (a subclass may load or gather otherwise),
    set up, over plain chunks of at most 64 KiB each read in place from ``folder``; the reader
    shares the layouts the loader's :meth:`~BaseItemLoader.gather` learns.
    """
    if type(loader) is not PyTreeLoader:
        return None
    try:
        decoder, learned = loader._decoder, loader._layouts  # pyright: ignore[reportPrivateUsage]  # this module's class
    except AttributeError:  # not set up, or an empty dataset
        return None
    if not isinstance(decoder, SampleDecoder) or index.compression or index.encryption or is_mds_index(index):
        return None
    if index.config.get("compression_level") == "sample" or index.table.has_extra("raw_filename"):
        return None
    return SmallChunkRows.for_samples(folder, index.table, decoder.spec, decoder.serializers, learned)


class TokensLoader(BaseItemLoader):
    """A flat stream of tokens read as blocks of ``block_size`` tokens.

    Writing: each sample is a 1-D array or tensor of tokens, stored raw; ``chunk_size`` counts
    tokens. Reading: chunk c holds ``dim // block_size`` blocks (a tail shorter than a block is
    dropped); a block is a slice of the mapped chunk, not a copy.

    Args:
        block_size: tokens per sample when reading (e.g. context length + 1).
    """

    def __init__(self, block_size: int | None = None) -> None:
        super().__init__()
        # Typed, yet checked: a float block size would slice the chunk wrongly.
        if block_size is not None and (not isinstance(block_size, int) or block_size <= 0):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"TokensLoader(block_size={block_size!r}): block_size must be a positive int")
        self.block_size = block_size

    def start_writing(self, serializers: Mapping[str, Serializer]) -> None:
        super().start_writing(serializers)
        self._tokens_shortcut: tuple[Callable[[Any], bytes], int] | None = None

    def resume_writing(self, written: Mapping[str, Any]) -> None:
        super().resume_writing(written)
        self._tokens_shortcut = None

    def encode(self, sample: Any, index: int) -> tuple[bytes, int]:
        # A token stream is thousands of arrays per chunk: once the first fixed the format, an array
        # like it goes straight to its leaf encoder (which raises TypeError for any other: the
        # checked path below then says what is wrong), without the flatten, spec and dtype look-ups.
        shortcut = getattr(self, "_tokens_shortcut", None)
        if shortcut is not None and type(sample) is np.ndarray:
            encode, itemsize = shortcut
            try:
                data = encode(sample)
            except TypeError:
                pass
            else:
                return data, len(data) // itemsize
        leaves = self._encoder.leaves(sample, index)
        if self._encoder.spec != LEAF or not self._encoder.data_format[0].startswith("no_header_"):
            raise TypeError(
                f"sample {index}: TokensLoader stores one 1-D numpy array or tensor of tokens per sample, "
                f"got {type(sample).__name__}"
            )
        data = leaves[0]
        itemsize = _token_dtype(self._encoder.data_format[0]).itemsize
        if self._encoder.data_format[0].startswith("no_header_numpy"):
            encoder = self._encoder.leaf_shortcut()
            self._tokens_shortcut = (encoder, itemsize) if encoder is not None else None
        return data, len(data) // itemsize

    def chunk_dim(self, weights: list[int]) -> int | None:
        return sum(weights)

    def setup(
        self, index: DatasetIndex, serializers: Mapping[str, Serializer], allow_pickle: bool | None = None
    ) -> None:
        super().setup(index, serializers, allow_pickle)
        if self.block_size is None:
            raise ValueError("TokensLoader needs block_size to read: TokensLoader(block_size=2049)")
        formats = index.data_format
        if len(formats) != 1 or not formats[0].startswith(("no_header_tensor:", "no_header_numpy:")):
            raise ValueError(f"{index.source}: a TokensLoader dataset has one raw token leaf, got {formats}")
        self._format = formats[0]
        self._as_tensor = formats[0].startswith("no_header_tensor")
        self._dtype = _token_dtype(formats[0])
        missing = np.flatnonzero(index.table.dims < 0)
        if missing.size:
            name = index.table.filename(int(missing[0]))
            raise ValueError(f"{index.source}: chunk {name} has no 'dim' (token count)")

    def items_in_chunk(self, chunk: ChunkInfo) -> int:
        assert self.block_size is not None
        return (chunk.dim or 0) // self.block_size

    def item_counts(self, index: DatasetIndex) -> np.ndarray:
        assert self.block_size is not None
        return np.maximum(index.table.dims, 0) // self.block_size

    def _blocks(self, chunk: Chunk) -> np.ndarray:
        """The chunk's tokens as a ``(blocks, block_size)`` view (a tail shorter than a block is left out)."""
        views = chunk.views
        found = views.get("token-blocks")
        if found is None:
            assert self.block_size is not None
            payload = chunk.payload()
            count = len(payload) // (self.block_size * self._dtype.itemsize)
            found = np.frombuffer(payload, dtype=self._dtype, count=count * self.block_size).reshape(
                count, self.block_size
            )
            views["token-blocks"] = found
        return found

    def load(self, chunk: Chunk, index: int) -> Any:
        blocks = self._blocks(chunk)
        if not 0 <= index < len(blocks):
            raise IndexError(f"chunk {chunk.name}: block {index} runs past its tokens ({len(blocks)} blocks)")
        return self._typed(blocks[index])

    def gather(self, chunk: Chunk, items: np.ndarray) -> Any:
        blocks = self._blocks(chunk)
        try:
            tokens = blocks[items]  # one copy of the blocks, in the order asked for
        except IndexError:
            raise IndexError(f"chunk {chunk.name}: a block runs past its tokens ({len(blocks)} blocks)") from None
        # As numpy whenever torch.from_numpy gives the stored dtype (all but bfloat16).
        return self._typed(tokens) if self._format == _BFLOAT16_TOKENS else tokens

    def _typed(self, tokens: np.ndarray) -> Any:
        if not self._as_tensor:
            return tokens
        torch = torch_if_loaded()
        if torch is None:
            import torch
        # torch leaves from_numpy's parameter untyped.
        return torch.from_numpy(tokens).view(torch_dtype(suffix_int(self._format)))  # pyright: ignore[reportUnknownMemberType]


_BFLOAT16_TOKENS = "no_header_tensor:10"

# numpy equivalents of the torch dtype table, to size tokens without importing torch.
_TORCH_AS_NUMPY = {
    0: "float32", 1: "float32", 2: "float64", 3: "float64", 4: "complex64", 5: "complex64",
    6: "complex128", 7: "complex128", 8: "float16", 9: "float16", 10: "uint16", 11: "uint8",
    12: "int8", 13: "int16", 14: "int16", 15: "int32", 16: "int32", 17: "int64", 18: "int64",
    19: "bool", 20: "uint16",
}  # fmt: skip


def _token_dtype(data_format: str) -> np.dtype:
    """The numpy dtype of a token leaf stored as ``data_format`` (a tensor's, without torch)."""
    index = suffix_int(data_format)
    if data_format.startswith("no_header_numpy"):
        return numpy_dtype(index)
    if index not in _TORCH_AS_NUMPY:
        raise ValueError(f"unknown torch dtype index {index} in the dataset")
    return np.dtype(_TORCH_AS_NUMPY[index])
