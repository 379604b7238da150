"""Reading Parquet files as a dataset's chunks: ``ParquetLoader`` and the chunk it opens.

A Parquet dataset's ``index.json`` (written by ``index_parquet_dataset``) lists one chunk per
``.parquet`` file: ``chunk_size`` is its row count, ``chunk_bytes`` its size, and
``config.data_format`` the Arrow type of each column. The files are read as they are; a sample
is one row as a dict ``{column name: Python value}`` (what ``pyarrow``'s ``to_pylist`` gives).

Rows are decoded a row group at a time (pyarrow converts batches much faster than single
values), and a decoded row group is dropped once each of its rows was read. pyarrow is imported
on first use and never decodes in its thread pool, so a process may fork after reading.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from typing import Any

from litdata_format._index._dataset_index import ChunkInfo, DatasetIndex
from litdata_format._index._index_json import check_chunk_file
from litdata_format._loaders._item_loaders import BaseItemLoader
from litdata_format._optional import import_optional

__all__ = ["ParquetChunk", "ParquetLoader"]


class ParquetChunk:
    """One Parquet file opened for reading rows by position.

    Args:
        path: the local file.
        columns: the columns to read (None = all).
        low_memory: read a row group when one of its rows is asked for (else the whole file
            at the first row).
        preload: with ``low_memory=False``, read the whole file now instead of at the first row.
    """

    def __init__(self, path: str | os.PathLike[str], columns: Sequence[str] | None = None,
                 low_memory: bool = True, preload: bool = False) -> None:  # fmt: skip
        pq = import_optional("pyarrow.parquet", "arrow", "reading Parquet files")
        self.name = str(path)
        self.views: dict[str, Any] = {}
        try:
            self._file = pq.ParquetFile(self.name, memory_map=True)
        except Exception as error:  # pyarrow raises ArrowInvalid / OSError subclasses
            raise ValueError(f"chunk {self.name}: not a readable Parquet file ({error})") from error
        self._columns = list(columns) if columns is not None else None
        if self._columns is not None:
            missing = [c for c in self._columns if c not in self._file.schema_arrow.names]
            if missing:
                raise ValueError(
                    f"chunk {self.name}: ParquetLoader(columns=...) names {missing}, which the file does not have "
                    f"(columns: {self._file.schema_arrow.names})"
                )
        meta = self._file.metadata
        self._starts = [0]
        for group in range(meta.num_row_groups):
            self._starts.append(self._starts[-1] + meta.row_group(group).num_rows)
        self._low_memory = low_memory
        self._table: Any = None
        self._rows: dict[int, list[dict[str, Any]]] = {}
        self._reads: dict[int, int] = {}
        if preload and not low_memory:
            self._whole()

    def __len__(self) -> int:
        return self._starts[-1]

    def _whole(self) -> Any:
        if self._table is None:
            self._table = self._file.read(columns=self._columns, use_threads=False)
        return self._table

    def _decode(self, group: int) -> list[dict[str, Any]]:
        if self._low_memory:
            table = self._file.read_row_group(group, columns=self._columns, use_threads=False)
        else:
            start, end = self._starts[group], self._starts[group + 1]
            table = self._whole().slice(start, end - start)
        return table.to_pylist()

    def row(self, index: int) -> dict[str, Any]:
        """Row ``index`` of the file as ``{column: value}``."""
        if not 0 <= index < self._starts[-1]:
            raise IndexError(f"chunk {self.name}: row {index} is out of range (it holds {self._starts[-1]})")
        group = bisect.bisect_right(self._starts, index) - 1
        rows = self._rows.get(group)
        if rows is None:
            rows = self._rows[group] = self._decode(group)
            self._reads[group] = 0
        self._reads[group] += 1
        if self._reads[group] >= len(rows):  # every row of the group was handed out once
            del self._rows[group], self._reads[group]
        return rows[index - self._starts[group]]

    def item(self, index: int) -> memoryview:
        raise TypeError(f"chunk {self.name} is a Parquet file: read it with ParquetLoader, not as chunk items")

    def payload(self) -> memoryview:
        raise TypeError(f"chunk {self.name} is a Parquet file: read it with ParquetLoader, not as a token stream")

    def close(self) -> None:
        """Drop decoded rows and close the file (rows already handed out stay valid)."""
        self.views.clear()
        self._rows.clear()
        self._reads.clear()
        self._table = None
        self._file.close()


class ParquetLoader(BaseItemLoader):
    """Read a dataset of Parquet files in place: each sample is one row as ``{column: value}``.

    Args:
        pre_load_chunk: with ``low_memory=False``, read a file as soon as it is opened rather
            than at its first row (accepted for upstream compatibility; it changes nothing else).
        low_memory: decode one row group at a time (the default). ``False`` reads each whole
            file into memory at once, which is faster for small files and costs their
            decompressed size per open file.
        columns: read only these columns (None = all).
    """

    def __init__(self, pre_load_chunk: bool = False, low_memory: bool = True,
                 columns: Sequence[str] | None = None) -> None:  # fmt: skip
        super().__init__()
        import_optional("pyarrow.parquet", "arrow", "ParquetLoader")
        # Typed, yet checked: a bare string is a sequence of one-letter "columns".
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ParquetLoader(columns={columns!r}): pass a list of column names")
        if columns is not None and not columns:
            raise ValueError("ParquetLoader(columns=[]) selects no column; pass None to read them all")
        self.pre_load_chunk = bool(pre_load_chunk)
        self.low_memory = bool(low_memory)
        self.columns = list(columns) if columns is not None else None

    def encode(self, sample: Any, index: int) -> tuple[bytes, int]:
        raise TypeError(
            "ParquetLoader reads Parquet files in place and writes nothing: index them with "
            "index_parquet_dataset(dir), or write chunks with PyTreeLoader"
        )

    def open_chunk(self, path: str | os.PathLike[str], info: ChunkInfo, index: DatasetIndex,
                   encryption: Any = None) -> ParquetChunk:  # fmt: skip
        check_chunk_file(path, info.filename, index.source)
        return ParquetChunk(path, self.columns, self.low_memory, self.pre_load_chunk)

    def load(self, chunk: Any, index: int) -> Any:
        if not isinstance(chunk, ParquetChunk):
            raise TypeError(f"chunk {getattr(chunk, 'name', '?')}: ParquetLoader reads Parquet files only")
        return chunk.row(index)
