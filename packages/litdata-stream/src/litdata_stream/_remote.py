"""Chunks of a remote dataset (object store, ``local:`` network drive), through the io cache.

The index is fetched into the dataset's cache folder, in the subfolder of its version (a digest
of the URL and the index's bytes, so a dataset rewritten at the same URL, or another dataset
sharing the folder, never reads these chunks). Every process of one dataset object reads the
version the first one found. Chunks are fetched ahead of the reader by the io prefetcher, pinned
while read, and marked consumed afterwards so the byte-capped cache can evict them.
:func:`open_source` picks a dataset's source: a local folder is read in place
(:class:`~litdata_stream._source.LocalSource`), anything else goes through the cache.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from litdata_format import INDEX_FILENAME, ChunkInfo, DatasetIndex, load_index
from litdata_format.internal import Chunk, open_chunk, write_file_atomic
from litdata_io import ChunkCache, Dir, Prefetcher, Storage, cache_dir_for, dataset_version, get_storage, resolve_dir
from litdata_stream._parquet_index import local_dataset_index, remote_parquet_index, select_files
from litdata_stream._source import ChunkOpener, ChunkSource, LocalSource, chunk_opener

__all__ = ["RemoteSource", "open_source"]


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
        storage = get_storage(url, dataset.storage_options, dataset.session_options)
        index, version = _versioned_index(dataset, storage, cache_dir)
        index = select_files(index, getattr(dataset, "file_pattern", None))
        cache = ChunkCache(cache_dir, storage, dataset.max_cache_size, compression=index.compression, version=version)
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


def _versioned_index(dataset: Any, storage: Storage, cache_dir: Path) -> tuple[DatasetIndex, str]:
    """The dataset's index and its version (the subfolder of ``cache_dir`` it is kept in).

    The first process of a dataset object records the version on it; its DataLoader workers
    read that index from the cache folder, so they see what the main process saw.
    """
    known = vars(dataset).get("_cache_version")
    if known is not None and (cache_dir / known / INDEX_FILENAME).is_file():
        return load_index(cache_dir / known / INDEX_FILENAME), known
    data: bytes | None = None
    try:
        data = _index_bytes(dataset.index_path) if dataset.index_path else storage.get(INDEX_FILENAME)
    except FileNotFoundError:
        if dataset.index_path:
            raise
        index, version = remote_parquet_index(storage, cache_dir)  # a folder of Parquet files
    else:
        version = dataset_version(storage.url, data)
        write_file_atomic(cache_dir / version / INDEX_FILENAME, data)
        index = load_index(cache_dir / version / INDEX_FILENAME)
    if known is not None and version != known:
        where = dataset.index_path or (
            storage.url_for(INDEX_FILENAME) if data is not None else f"the files of {storage.url}"
        )
        raise RuntimeError(
            f"{where} changed since this dataset was opened (its copy in {cache_dir / known} is gone): the "
            "dataset was rewritten. Create a new StreamingDataset to read the new data"
        )
    vars(dataset)["_cache_version"] = version
    return index, version


def _index_bytes(index_path: str) -> bytes:
    """The bytes of the index file ``index_path`` (a file, a folder holding index.json, or a URL)."""
    if "://" not in index_path:
        path = Path(os.path.expanduser(index_path))
        path = path / INDEX_FILENAME if path.is_dir() else path
        if not path.is_file():
            load_index(path)  # raises its error naming the path
        return path.read_bytes()
    head, _, name = index_path.rstrip("/").rpartition("/")
    return get_storage(head).get(name)


def _cache_root(dataset: Any) -> Any:
    setting = getattr(dataset, "cache_dir", None)
    return getattr(setting, "path", setting)


def open_source(dataset: Any) -> ChunkSource:
    """The chunk source for a StreamingDataset's ``input_dir``: local folders are read in place,
    URLs and ``local:`` network drives go through the io cache.
    """
    resolved = resolve_dir(dataset.input_dir)
    url = None
    if resolved.url is None and resolved.path is not None:
        directory = Path(resolved.path)
        if not directory.is_dir():
            raise FileNotFoundError(
                f"input_dir {str(dataset.input_dir)!r} is not a directory (nor a URL such as s3://bucket/path)"
            )
        profile = getattr(dataset, "posix", None)
        if profile is None or profile.in_place:
            index = local_dataset_index(directory, getattr(dataset, "index_path", None), _cache_root(dataset))
            index = select_files(index, getattr(dataset, "file_pattern", None))
            verify = getattr(dataset, "verify_chunks", False)
            return LocalSource(directory, index, dataset.encryption, opener=chunk_opener(dataset), verify=verify)
        url = "local:" + str(directory)  # LITDATA_POSIX_FAST=0: copy through the cache like a network drive
    return RemoteSource.open(dataset, url)
