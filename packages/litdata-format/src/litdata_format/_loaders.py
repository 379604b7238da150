"""Item loaders: how samples are laid out inside chunks, on both the writing and the reading side.

``PyTreeLoader`` stores one sample per item (the default). ``TokensLoader`` stores 1-D token
arrays back to back and reads fixed-size blocks across them, for LLM pre-training. The loader's
class name is written to ``config.item_loader`` and checked when a dataset is opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from litdata_format._chunk import Chunk
from litdata_format._index import ChunkInfo, DatasetIndex
from litdata_format._mds import MdsSampleDecoder, is_mds_index
from litdata_format._pytree import LEAF
from litdata_format._sample import SampleDecoder, SampleEncoder
from litdata_format._serializers import (
    Serializer,
    numpy_dtype,
    suffix_int,
    torch_dtype,
    torch_if_loaded,
)

__all__ = ["BaseItemLoader", "PyTreeLoader", "TokensLoader"]


class BaseItemLoader:
    """The interface both sides of the format use; subclasses are named in ``config.item_loader``."""

    def __init__(self) -> None:
        self._serializers: Mapping[str, Serializer] = {}

    @property
    def name(self) -> str:
        return type(self).__name__

    # -- writing --------------------------------------------------------------------------------
    def start_writing(self, serializers: Mapping[str, Serializer]) -> None:
        self._encoder = SampleEncoder(serializers)

    def encode(self, sample: Any, index: int) -> tuple[bytes, int]:
        """The item bytes of ``sample`` and how much of ``chunk_size`` it uses."""
        raise NotImplementedError

    def written_config(self) -> dict[str, Any]:
        """``data_format`` and ``data_spec`` for the index, once a sample was written."""
        spec = self._encoder.spec
        return {"data_format": self._encoder.data_format, "data_spec": spec.to_json() if spec else None}

    def chunk_dim(self, weights: list[int]) -> int | None:
        """The ``dim`` of a chunk entry given its items' weights."""
        return None

    # -- reading --------------------------------------------------------------------------------
    def setup(self, index: DatasetIndex, serializers: Mapping[str, Serializer]) -> None:
        """Prepare to read the dataset described by ``index``."""
        if index.item_loader != self.name:
            raise ValueError(
                f"{index.source}: the dataset was written with {index.item_loader}, but it is being read "
                f"with {self.name}; pass item_loader={index.item_loader}(...)"
            )
        self._index = index
        self._serializers = serializers

    def items_in_chunk(self, chunk: ChunkInfo) -> int:
        """How many samples this loader yields from ``chunk``."""
        return chunk.chunk_size

    def open_chunk(self, path: str | os.PathLike[str], info: ChunkInfo, index: DatasetIndex,
                   encryption: Any = None) -> Chunk:  # fmt: skip
        """Open the chunk file at ``path`` for :meth:`load` (readers call this, never ``open_chunk``
        directly, so a loader whose chunks are not LitData chunk files decides how to open them)."""
        from litdata_format._reader import open_chunk  # _reader imports this module

        return open_chunk(path, info, index, encryption)

    def load(self, chunk: Chunk, index: int) -> Any:
        """Sample ``index`` (counted inside the chunk)."""
        raise NotImplementedError


class PyTreeLoader(BaseItemLoader):
    """One sample per item: a pytree of leaves, each stored by its serializer."""

    def encode(self, sample: Any, index: int) -> tuple[bytes, int]:
        return self._encoder.encode(sample, index), 1

    def setup(self, index: DatasetIndex, serializers: Mapping[str, Serializer]) -> None:
        super().setup(index, serializers)
        self._decoder: SampleDecoder | MdsSampleDecoder
        if is_mds_index(index):
            self._decoder = MdsSampleDecoder(index)
        else:
            self._decoder = SampleDecoder(index.data_format, index.config["data_spec"], serializers)

    def load(self, chunk: Chunk, index: int) -> Any:
        rows = getattr(chunk, "sample", None)
        if rows is not None:  # layouts that store decoded rows (Arrow IPC) hand the sample over
            return rows(index)
        return self._decoder.decode(chunk.item(index), f"chunk {chunk.name}, item {index}")


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
        if block_size is not None and (not isinstance(block_size, int) or block_size <= 0):
            raise ValueError(f"TokensLoader(block_size={block_size!r}): block_size must be a positive int")
        self.block_size = block_size

    def encode(self, sample: Any, index: int) -> tuple[bytes, int]:
        leaves = self._encoder.leaves(sample, index)
        if self._encoder.spec != LEAF or not self._encoder.data_format[0].startswith("no_header_"):
            raise TypeError(
                f"sample {index}: TokensLoader stores one 1-D numpy array or tensor of tokens per sample, "
                f"got {type(sample).__name__}"
            )
        data = leaves[0]
        itemsize = self._itemsize()
        return data, len(data) // itemsize

    def _itemsize(self) -> int:
        fmt = self._encoder.data_format[0]
        if fmt.startswith("no_header_numpy"):
            return numpy_dtype(suffix_int(fmt)).itemsize
        return np.dtype(_torch_numpy_name(suffix_int(fmt))).itemsize

    def chunk_dim(self, weights: list[int]) -> int | None:
        return sum(weights)

    def setup(self, index: DatasetIndex, serializers: Mapping[str, Serializer]) -> None:
        super().setup(index, serializers)
        if self.block_size is None:
            raise ValueError("TokensLoader needs block_size to read: TokensLoader(block_size=2049)")
        formats = index.data_format
        if len(formats) != 1 or not formats[0].startswith(("no_header_tensor:", "no_header_numpy:")):
            raise ValueError(f"{index.source}: a TokensLoader dataset has one raw token leaf, got {formats}")
        self._format = formats[0]
        self._as_tensor = formats[0].startswith("no_header_tensor")
        self._dtype = np.dtype(
            _torch_numpy_name(suffix_int(formats[0])) if self._as_tensor else numpy_dtype(suffix_int(formats[0]))
        )
        for chunk in index.chunks:
            if chunk.dim is None:
                raise ValueError(f"{index.source}: chunk {chunk.filename} has no 'dim' (token count)")

    def items_in_chunk(self, chunk: ChunkInfo) -> int:
        assert self.block_size is not None
        return (chunk.dim or 0) // self.block_size

    def load(self, chunk: Chunk, index: int) -> Any:
        assert self.block_size is not None
        itemsize = self._dtype.itemsize
        start = index * self.block_size * itemsize
        view = chunk.payload()[start : start + self.block_size * itemsize]
        if len(view) != self.block_size * itemsize:
            raise IndexError(f"chunk {chunk.name}: block {index} runs past its tokens")
        if self._as_tensor:
            torch = torch_if_loaded()
            if torch is None:
                import torch
            return torch.frombuffer(view, dtype=torch_dtype(suffix_int(self._format)))
        return np.frombuffer(view, dtype=self._dtype)


# numpy equivalents of the torch dtype table, to size tokens without importing torch.
_TORCH_AS_NUMPY = {
    0: "float32", 1: "float32", 2: "float64", 3: "float64", 4: "complex64", 5: "complex64",
    6: "complex128", 7: "complex128", 8: "float16", 9: "float16", 10: "uint16", 11: "uint8",
    12: "int8", 13: "int16", 14: "int16", 15: "int32", 16: "int32", 17: "int64", 18: "int64",
    19: "bool", 20: "uint16",
}  # fmt: skip


def _torch_numpy_name(index: int) -> str:
    try:
        return _TORCH_AS_NUMPY[index]
    except KeyError:
        raise ValueError(f"unknown torch dtype index {index} in the dataset") from None
