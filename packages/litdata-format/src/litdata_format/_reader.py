"""Random access to an optimized dataset on local disk."""

from __future__ import annotations

import bisect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from litdata_format._chunk import Chunk
from litdata_format._dataset_index import ChunkInfo
from litdata_format._index import load_index
from litdata_format._loaders import BaseItemLoader, PyTreeLoader, TokensLoader
from litdata_format._registry import resolve_serializers
from litdata_format._serializers import Serializer

__all__ = ["DatasetReader"]


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
        """(chunk number, position inside the chunk) of sample ``index``.

        Args:
            index: the sample's position in the dataset.
        """
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} is out of range: the dataset at {self.input_dir} has {len(self)}")
        chunk = bisect.bisect_right(self._starts, index) - 1
        return chunk, index - self._starts[chunk]

    def chunk(self, number: int) -> Chunk:
        """Chunk ``number``, opened on first use.

        Args:
            number: the chunk's position in the index.
        """
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
        """Release the chunks this reader opened (their mappings or file handles)."""
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
