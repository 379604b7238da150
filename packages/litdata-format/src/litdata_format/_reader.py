"""Opening chunks in any of the layouts, and random access to a dataset on local disk.

:func:`open_chunk` takes a chunk file as stored (maybe whole-file compressed, maybe encrypted)
and returns a :class:`~litdata_format._chunk.Chunk` that the item loaders read. The layouts
are told apart by their bytes: the framed zstd layout starts with its magic, the Arrow rows
layout ends with its magic, anything else is the classic layout.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from litdata_format._chunk import ARROW_ROWS_MAGIC, FRAMED_MAGIC, Chunk, ChunkView, map_file
from litdata_format._compression import decompress
from litdata_format._index import ChunkInfo, DatasetIndex, check_chunk_file, load_index
from litdata_format._loaders import BaseItemLoader, PyTreeLoader, TokensLoader
from litdata_format._mds import is_mds_index, open_mds_shard
from litdata_format._registry import resolve_serializers
from litdata_format._serializers import Serializer

__all__ = ["DatasetReader", "cached_chunk_sizes", "open_chunk", "plain_chunk_name"]


def plain_chunk_name(info: ChunkInfo, compression: str | None) -> str:
    """The file name a whole-file compressed chunk has once decompressed."""
    if compression and info.filename.endswith(f".{compression}.bin"):
        return info.filename[: -len(f".{compression}.bin")] + ".bin"
    return info.filename


def cached_chunk_sizes(info: ChunkInfo) -> tuple[int, ...]:
    """The sizes the file of ``info`` may have once stored plain (under :func:`plain_chunk_name`).

    Empty when the index does not tell. ``chunk_bytes`` is the file's size (decompressed, for a
    whole-file compressed chunk). Upstream writers before October 2024 (LitData issue #393) left
    the header, ``4 * (chunk_size + 2)`` bytes, out of it, so that size is accepted too. A
    compressed MosaicML shard is kept compressed and its index gives only the decompressed size.
    """
    if info.chunk_bytes <= 0 or info.extra.get("raw_filename", info.filename) != info.filename:
        return ()
    return (info.chunk_bytes, info.chunk_bytes + 4 * (info.chunk_size + 2))


def open_chunk(
    path: str | os.PathLike[str],
    info: ChunkInfo,
    index: DatasetIndex,
    encryption: Any = None,
) -> Chunk:
    """Open the chunk stored at ``path`` (described by ``info`` in ``index``).

    Whole-file compressed chunks (``*.zstd.bin``) are decompressed into memory; callers that
    cache should decompress to a plain file once (:func:`decompress`) and open that instead.
    """
    path = Path(path)
    check_chunk_file(path, info.filename, index.source)
    if is_mds_index(index):
        return open_mds_shard(path, info, index)
    name = str(path)
    compression = index.compression
    data: Any
    if compression and path.name.endswith(f".{compression}.bin"):
        data = bytearray(decompress(path.read_bytes(), name, info.chunk_bytes))
    else:
        data = map_file(path)
    decrypt: Callable[[Any], bytes] | None = None
    if index.encryption:
        if encryption is None:
            raise ValueError(
                f"{index.source}: the dataset is encrypted ({index.encryption.get('algorithm')}, level "
                f"{index.encryption.get('level')}); pass encryption=... with the key it was written with"
            )
        encryption.check_matches(index.encryption, index.source)
        if index.encryption.get("level") == "chunk":
            data = bytearray(encryption.decrypt(data, where=name))
        else:

            def decrypt_item(item: Any) -> bytes:
                return encryption.decrypt(item, where=name)

            decrypt = decrypt_item

    view = memoryview(data)
    if bytes(view[: len(FRAMED_MAGIC)]) == FRAMED_MAGIC:
        from litdata_format._framed import FramedChunk

        return FramedChunk(data, name, index)
    if bytes(view[-len(ARROW_ROWS_MAGIC) :]) == ARROW_ROWS_MAGIC:
        from litdata_format._arrow_rows import ArrowRowsChunk, is_arrow_rows_chunk

        if is_arrow_rows_chunk(view):
            return ArrowRowsChunk(data, name, index)
    if index.config.get("compression_level") == "sample":
        from litdata_format._framed import SampleZstdChunk

        return SampleZstdChunk(data, name, decrypt)
    return ChunkView(data, name, decrypt)


class DatasetReader:
    """Random access to an optimized dataset in a local directory (chunks opened lazily).

    Args:
        input_dir: the dataset directory.
        item_loader: how to read items; the default matches ``config.item_loader`` (PyTreeLoader).
        serializers: extra serializers by key, as given to the writer.
        encryption: the key, for encrypted datasets.
        allow_pickle: whether values stored with pickle may be read (unpickling runs code from
            the data); None follows ``LITDATA_ALLOW_PICKLE``, which allows it when unset.
    """

    def __init__(
        self,
        input_dir: str | os.PathLike[str],
        item_loader: BaseItemLoader | None = None,
        serializers: Mapping[str, Serializer] | None = None,
        encryption: Any = None,
        allow_pickle: bool | None = None,
    ) -> None:
        self.input_dir = Path(input_dir)
        self.index = load_index(self.input_dir)
        if item_loader is None:
            item_loader = _default_loader(self.index.item_loader)
        self.item_loader = item_loader
        self.item_loader.setup(self.index, resolve_serializers(serializers), allow_pickle)
        self.encryption = encryption
        counts = [self.item_loader.items_in_chunk(c) for c in self.index.chunks]
        self._starts = [0]
        for count in counts:
            self._starts.append(self._starts[-1] + count)
        self._open: dict[int, Chunk] = {}

    def __len__(self) -> int:
        return self._starts[-1]

    def locate(self, index: int) -> tuple[int, int]:
        """(chunk number, position inside the chunk) of sample ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} is out of range: the dataset at {self.input_dir} has {len(self)}")
        chunk = bisect.bisect_right(self._starts, index) - 1
        return chunk, index - self._starts[chunk]

    def chunk(self, number: int) -> Chunk:
        """Chunk ``number``, opened on first use."""
        found = self._open.get(number)
        if found is None:
            info = self.index.chunks[number]
            found = self.item_loader.open_chunk(self.input_dir / info.filename, info, self.index, self.encryption)
            self._check_count(found, info)
            self._open[number] = found
        return found

    def _check_count(self, chunk: Chunk, info: ChunkInfo) -> None:
        if len(chunk) != info.chunk_size:
            raise ValueError(f"chunk {chunk.name}: holds {len(chunk)} items but index.json says {info.chunk_size}")

    def __getitem__(self, index: int) -> Any:
        number, position = self.locate(index)
        return self.item_loader.load(self.chunk(number), position)

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def close(self) -> None:
        for chunk in self._open.values():
            close = getattr(chunk, "close", None)
            if close is not None:
                close()
        self._open.clear()


def _default_loader(name: str) -> BaseItemLoader:
    """The loader a dataset written with ``config.item_loader == name`` is read with by default."""
    if name == "TokensLoader":
        return TokensLoader()
    if name == "ParquetLoader":
        from litdata_format._parquet import ParquetLoader

        return ParquetLoader()
    return PyTreeLoader()
