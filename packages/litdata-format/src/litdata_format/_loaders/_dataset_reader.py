"""Random access to an optimized dataset on local disk."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from litdata_format._chunks._chunk import Chunk
from litdata_format._index._dataset_index import DatasetIndex
from litdata_format._index._index_json import load_index
from litdata_format._loaders._item_loaders import BaseItemLoader, PyTreeLoader, TokensLoader
from litdata_format._loaders._opener import ChunkOpener
from litdata_format._loaders._sample_map import SampleMap
from litdata_format._samples._registry import resolve_serializers
from litdata_format._samples._serializers import Serializer

__all__ = ["DatasetReader", "loader_for"]


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
        self.item_loader = loader_for(self.index) if item_loader is None else item_loader
        self.item_loader.setup(self.index, resolve_serializers(serializers), allow_pickle)
        self.encryption = encryption
        self.samples = SampleMap(self.item_loader.item_counts(self.index))
        table = self.index.table
        self._opener = ChunkOpener(table.filename, table.chunk_sizes, self._open_file, keep_open=None)

    def __len__(self) -> int:
        return len(self.samples)

    def locate(self, index: int) -> tuple[int, int]:
        """(chunk number, position inside the chunk) of sample ``index``.

        Args:
            index: the sample's position in the dataset.
        """
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} is out of range: the dataset at {self.input_dir} has {len(self)}")
        return self.samples.locate(index)

    def chunk(self, number: int) -> Chunk:
        """Chunk ``number``, opened on first use (and kept open until :meth:`close`).

        Args:
            number: the chunk's position in the index.
        """
        return self._opener.chunk(number)

    def _open_file(self, number: int) -> Chunk:
        info = self.index.chunks[number]
        return self.item_loader.open_chunk(self.input_dir / info.filename, info, self.index, self.encryption)

    def __getitem__(self, index: int) -> Any:
        number, position = self.locate(index)
        return self.item_loader.load(self.chunk(number), position)

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def close(self) -> None:
        """Release the chunks this reader opened (their mappings or file handles)."""
        self._opener.close()


def loader_for(index: DatasetIndex) -> BaseItemLoader:
    """A new loader of the kind ``index`` was written with (``config.item_loader``), not set up yet.

    The one table of default loaders: ``DatasetReader`` and the streaming dataset both read an index
    given no ``item_loader`` with this. The ``TokensLoader`` it returns has no ``block_size``, so its
    ``setup`` asks the caller for one; any other name reads as ``PyTreeLoader``.
    """
    name = index.item_loader
    if name == "TokensLoader":
        return TokensLoader()
    if name == "ParquetLoader":
        from litdata_format._loaders._parquet import ParquetLoader

        return ParquetLoader()
    return PyTreeLoader()
