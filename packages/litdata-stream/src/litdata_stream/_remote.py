"""Chunks of a remote dataset (object store, ``local:`` network drive), through the io cache.

The index is fetched into the dataset's cache folder; chunks are fetched ahead of the reader
by the io prefetcher, pinned while read, and marked consumed afterwards so the byte-capped
cache can evict them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from litdata_format import Chunk, ChunkInfo, DatasetIndex, load_index, open_chunk
from litdata_io import ChunkCache, Dir, Prefetcher, cache_dir_for, get_storage, resolve_dir
from litdata_stream._parquet_index import remote_parquet_index, select_files
from litdata_stream._source import ChunkOpener, chunk_opener

__all__ = ["RemoteSource"]

_INDEX = "index.json"


class RemoteSource:
    """A chunk source reading through a :class:`~litdata_io.ChunkCache` and a prefetcher."""

    def __init__(self, index: DatasetIndex, cache: ChunkCache, prefetcher: Prefetcher, encryption: Any,
                 keep_open: int = 2, opener: ChunkOpener = open_chunk) -> None:  # fmt: skip
        self.index = index
        self.opener = opener
        self.cache = cache
        self.prefetcher = prefetcher
        self.encryption = encryption
        self._keep_open = keep_open
        self._open: dict[int, Chunk] = {}

    @classmethod
    def open(cls, dataset: Any, url: str | None = None) -> RemoteSource:
        """The source for ``dataset.input_dir`` (a URL or a ``Dir`` with a URL), or for ``url`` if given."""
        resolved = resolve_dir(url if url is not None else dataset.input_dir)
        cache_setting = dataset.cache_dir
        if isinstance(cache_setting, Dir):
            cache_setting = cache_setting.path
        url = resolved.url
        if url is None:
            raise ValueError(f"input_dir {dataset.input_dir!r} resolved to no URL")
        cache_dir = Path(resolved.path) if resolved.path is not None else cache_dir_for(url, cache_setting)
        cache_dir.mkdir(parents=True, exist_ok=True)
        storage = get_storage(url, dataset.storage_options, dataset.session_options)
        if dataset.index_path:
            index = load_index(_local_index(dataset.index_path, storage, cache_dir))
        else:
            try:
                storage.download(_INDEX, cache_dir / _INDEX)
                index = load_index(cache_dir / _INDEX)
            except FileNotFoundError:  # a folder of Parquet files is indexed into the cache folder
                index = remote_parquet_index(storage, cache_dir)
        index = select_files(index, getattr(dataset, "file_pattern", None))
        cache = ChunkCache(cache_dir, storage, dataset.max_cache_size, compression=index.compression)
        prefetcher = Prefetcher(cache, max(1, int(dataset.max_pre_download)))
        return cls(index, cache, prefetcher, dataset.encryption, opener=chunk_opener(dataset))

    def schedule(self, chunks: list[int]) -> None:
        self.prefetcher.schedule([self.index.chunks[c] for c in chunks])

    def chunk(self, number: int) -> Chunk:
        found = self._open.pop(number, None)
        if found is None:
            info = self.index.chunks[number]
            path = self.prefetcher.wait(info)  # returned pinned
            try:
                found = self.opener(path, info, self.index, self.encryption)
            except BaseException:
                self.cache.release(info)
                raise
            if len(found) != info.chunk_size:
                self.cache.release(info)
                raise ValueError(f"chunk {found.name}: holds {len(found)} items but index.json says {info.chunk_size}")
        self._open[number] = found
        while len(self._open) > self._keep_open:
            oldest = next(iter(self._open))
            self._unpin(oldest, consumed=False)
        return found

    def release(self, number: int) -> None:
        if number in self._open:
            self._unpin(number, consumed=True)

    def _unpin(self, number: int, consumed: bool) -> None:
        chunk = self._open.pop(number)
        info: ChunkInfo = self.index.chunks[number]
        close = getattr(chunk, "close", None)
        if close is not None:
            close()
        self.cache.release(info)
        if consumed:
            self.cache.mark_consumed(info)

    def close(self) -> None:
        for number in list(self._open):
            self._unpin(number, consumed=False)
        self.prefetcher.close()


def _local_index(index_path: str, storage: Any, cache_dir: Path) -> Path:
    """``index_path`` as a local file (downloaded into the cache folder when it is a URL)."""
    if "://" not in index_path:
        return Path(os.path.expanduser(index_path))
    head, _, name = index_path.rstrip("/").rpartition("/")
    target = cache_dir / name
    get_storage(head).download(name, target)
    return target
