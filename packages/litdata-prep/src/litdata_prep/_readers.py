"""Readers: how ``optimize``/``map`` turn the user's inputs into what ``fn`` receives; and ``walk``.

A reader first remaps the whole input list (``remap_items``, in the parent, before the work is
split), then reads each remapped item in a worker (``read``). :class:`ParquetReader` splits big
Parquet files into cached shards of ``num_rows`` rows so that many workers share one big file.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

__all__ = ["BaseReader", "ParquetReader", "walk"]

_PARQUET_INSTALL = 'pip install "litdata-prep[parquet]"'


class BaseReader(ABC):
    """The reader interface: subclass it and implement :meth:`remap_items` and :meth:`read`."""

    def get_num_nodes(self) -> int:
        """How many machines run the job (``DATA_OPTIMIZER_NUM_NODES``, default 1)."""
        return int(os.getenv("DATA_OPTIMIZER_NUM_NODES", "1"))

    def get_node_rank(self) -> int:
        """This machine's rank among them (``DATA_OPTIMIZER_NODE_RANK``, default 0)."""
        return int(os.getenv("DATA_OPTIMIZER_NODE_RANK", "0"))

    @abstractmethod
    def remap_items(self, items: Any, num_workers: int) -> list[Any]:
        """The items to distribute, given the user's inputs (e.g. shards of big files).

        Args:
            items: the inputs the user gave.
            num_workers: how many workers the items are for.
        """

    @abstractmethod
    def read(self, item: Any) -> Any:
        """What ``fn`` receives for one remapped item.

        Args:
            item: one of the items :meth:`remap_items` returned.
        """


class ParquetReader(BaseReader):
    """Split Parquet files into shards of at most ``num_rows`` rows, cached under ``cache_folder``.

    Args:
        cache_folder: where the shards are written (reused when they already exist).
        num_rows: the most rows per shard.
        to_pandas: give ``fn`` a pandas DataFrame (needs pandas) instead of a ``pyarrow.parquet.ParquetFile``.
        columns: read only these columns (``fn`` then gets a table, or a DataFrame with ``to_pandas``).
        filters: pyarrow filters applied when reading a shard.
    """

    def __init__(
        self,
        cache_folder: str,
        num_rows: int = 65536,
        to_pandas: bool = True,
        columns: list[str] | None = None,
        filters: Any | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(num_rows, int) or num_rows < 1:
            raise ValueError(f"ParquetReader: num_rows must be a positive int, got {num_rows!r}")
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise ImportError(f"ParquetReader needs pyarrow: {_PARQUET_INSTALL}") from None
        self.cache_folder = str(cache_folder)
        self.num_rows = num_rows
        self.to_pandas = to_pandas
        self.columns = columns
        self.filters = filters
        self._open: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_open"] = None
        return state

    def remap_items(self, items: Any, num_workers: int) -> list[str]:
        """Write (or reuse) the shards of every file; return their paths in input order.

        Args:
            items: the Parquet files' paths.
            num_workers: how many workers the shards are for.
        """
        import pyarrow.parquet as pq

        folder = os.path.join(self.cache_folder, str(self.num_rows))
        os.makedirs(folder, exist_ok=True)
        shards = []
        for path in items:
            if not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"ParquetReader: inputs must be Parquet file paths, got {path!r}")
            name = os.path.basename(os.fspath(path))
            with pq.ParquetFile(path) as source:
                total = int(source.metadata.num_rows)
                for start in range(0, total, self.num_rows):
                    end = min(start + self.num_rows, total)
                    shard = os.path.join(folder, f"{start}_{end}_{name}")
                    if not os.path.exists(shard):
                        self._write_shard(source, start, end, shard)
                    shards.append(shard)
        return shards

    def _write_shard(self, source: Any, start: int, end: int, dest: str) -> None:
        """Write rows ``[start, end)`` reading only the row groups that hold them (through a temp name)."""
        import pyarrow.parquet as pq

        groups, offset, first = [], 0, 0
        for g in range(source.metadata.num_row_groups):
            rows = int(source.metadata.row_group(g).num_rows)
            if offset + rows > start and offset < end:
                if not groups:
                    first = offset
                groups.append(g)
            offset += rows
            if offset >= end:
                break
        table = source.read_row_groups(groups).slice(start - first, end - start)
        tmp = f"{dest}.{os.getpid()}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, dest)

    def read(self, item: str) -> Any:
        import pyarrow.parquet as pq

        if self._open is not None:
            self._open.close()
            self._open = None
        if self.to_pandas or self.columns is not None or self.filters is not None:
            table = pq.read_table(item, columns=self.columns, filters=self.filters)
            if not self.to_pandas:
                return table
            try:
                return table.to_pandas()
            except ImportError:
                raise ImportError(
                    'ParquetReader(to_pandas=True) needs pandas: pip install "litdata-prep[pandas]", '
                    "or pass to_pandas=False to get a pyarrow.parquet.ParquetFile"
                ) from None
        self._open = pq.ParquetFile(item)
        return self._open


def _listdir(folder: str) -> tuple[str, list[str], list[str]]:
    dirs, files = [], []
    with os.scandir(folder) as entries:
        for entry in entries:
            (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
    return folder, sorted(dirs), sorted(files)


class walk:
    """Iterate ``(folder, subfolders, files)`` like ``os.walk``, listing folders concurrently.

    The order is not depth-first: folders come as their listings finish. Useful on network file
    systems where each listing is slow.

    Args:
        folder: the root folder.
        max_workers: concurrent listings.
    """

    def __init__(self, folder: str, max_workers: int | None = os.cpu_count()) -> None:
        self.folder = os.fspath(folder)
        self.max_workers = max(1, max_workers or 1)

    def __iter__(self) -> Iterator[tuple[str, list[str], list[str]]]:
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            pending: set[Future[tuple[str, list[str], list[str]]]] = {pool.submit(_listdir, self.folder)}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    folder, dirs, files = future.result()
                    for name in dirs:
                        pending.add(pool.submit(_listdir, os.path.join(folder, name)))
                    yield folder, dirs, files
