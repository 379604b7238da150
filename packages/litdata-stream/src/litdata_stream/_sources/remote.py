"""Chunks of a remote dataset (object store, ``local:`` network drive), through the io cache.

The index is fetched into the subfolder of its version (a digest of the URL and the index's bytes,
so a dataset rewritten at the same URL never reads these chunks). Chunks are prefetched, pinned while
read, and marked consumed afterwards so the byte-capped cache can evict them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from litdata_format import INDEX_FILENAME, ChunkInfo, DatasetIndex, load_index
from litdata_format.internal import Chunk, open_chunk, read_index_file
from litdata_format.internal import ChunkOpener as OpenChunks
from litdata_io import ChunkCache, Prefetcher, Storage, get_storage
from litdata_io.internal import check_own_folders, file_version, is_disk_full, make_cache_folder
from litdata_stream._parquet_index import remote_parquet_index
from litdata_stream._sources.source import ChunkOpener, ChunkOrigin

__all__ = ["RemoteSource", "fetch_index"]


class RemoteSource:
    """A chunk source reading through a :class:`~litdata_io.ChunkCache` and a prefetcher."""

    def __init__(self, index: DatasetIndex, cache: ChunkCache, prefetcher: Prefetcher, encryption: Any,
                 keep_open: int = 2, opener: ChunkOpener = open_chunk) -> None:  # fmt: skip
        self.index = index
        self.opener = opener
        self.cache = cache
        self.prefetcher = prefetcher
        self.encryption = encryption
        table = index.table
        self._chunks = OpenChunks(table.filename, table.chunk_sizes, self._open_file, keep_open, self._unpin)

    @classmethod
    def open(cls, origin: ChunkOrigin, opener: ChunkOpener = open_chunk) -> RemoteSource:
        """The source for ``origin`` (a URL), in this process.

        Only when the index's copy in the cache folder is gone is it fetched again, to tell whether the
        dataset was rewritten since.
        """
        assert origin.url is not None and origin.cache_dir is not None and origin.version is not None
        storage = get_storage(origin.url, origin.storage_options, origin.session_options)
        if not (origin.cache_dir / origin.version / INDEX_FILENAME).is_file():
            _, version, where = fetch_index(storage, origin.cache_dir, origin.index_path)
            if version != origin.version:
                raise RuntimeError(
                    f"{where} changed since this dataset was opened (its copy in {origin.cache_dir / origin.version} "
                    "is gone): the dataset was rewritten. Create a new StreamingDataset to read the new data"
                )
        index = origin.index
        cache = ChunkCache(
            origin.cache_dir, storage, origin.max_cache_size, compression=index.compression, version=origin.version
        )
        prefetcher = Prefetcher(cache, max(1, int(origin.max_pre_download)))
        return cls(index, cache, prefetcher, origin.encryption, opener=opener)

    def schedule(self, chunks: list[int]) -> None:
        self.prefetcher.schedule([self.index.chunks[c] for c in chunks])

    def chunk(self, number: int) -> Chunk:
        return self._chunks.chunk(number)

    def _open_file(self, number: int) -> Chunk:
        info = self.index.chunks[number]
        path = self.prefetcher.wait(info)  # returned pinned; unpinned when the opener closes it
        try:
            return self.opener(path, info, self.index, self.encryption)
        except BaseException:
            self.cache.release(info)
            raise

    def release(self, number: int) -> None:
        self._chunks.release(number)

    def _unpin(self, number: int, consumed: bool) -> None:
        info: ChunkInfo = self.index.chunks[number]
        self.cache.release(info)
        if consumed:
            self.cache.mark_consumed(info)

    def close(self) -> None:
        self._chunks.close()
        self.prefetcher.close()


def fetch_index(storage: Storage, cache_dir: Path, index_path: str | None) -> tuple[DatasetIndex, str, str]:
    """Fetch the index of the dataset at ``storage`` into its version's subfolder of ``cache_dir``.

    Read from a downloaded file as a local one is (never whole in memory), kept only if it parses. A
    folder of Parquet files without an index gets one built from their footers.

    Returns:
        The index, its version, and where it was read from (for messages).
    """
    make_cache_folder(cache_dir)  # not through another user's link, nor in a folder anyone can swap
    # A hidden name, as a temporary file of atomic_file's is named: the cache's listings skip it.
    download = cache_dir / f".{INDEX_FILENAME}.{os.urandom(4).hex()}.tmp"
    try:
        return _fetch_index(storage, cache_dir, index_path, download)
    except OSError as err:
        if not is_disk_full(err):
            raise
        raise OSError(
            err.errno,
            f"no space left on the disk of the cache folder to keep {index_path or storage.url_for(INDEX_FILENAME)} "
            "while opening the dataset: free space on that disk, or pass cache_dir= a folder on another one",
            str(cache_dir),
        ) from err
    finally:
        download.unlink(missing_ok=True)


def _fetch_index(
    storage: Storage, cache_dir: Path, index_path: str | None, download: Path
) -> tuple[DatasetIndex, str, str]:
    """:func:`fetch_index` by way of ``download``, a file of ``cache_dir`` the caller removes."""
    try:
        _download_index(storage, index_path, download)
    except FileNotFoundError:
        if index_path:
            raise
        index, version = remote_parquet_index(storage, cache_dir)  # a folder of Parquet files
        return index, version, f"the files of {storage.url}"
    where = index_path or storage.url_for(INDEX_FILENAME)
    index = read_index_file(download, where)
    version = file_version(storage.url, download)
    target = cache_dir / version / INDEX_FILENAME
    target.parent.mkdir(parents=True, exist_ok=True)
    check_own_folders(cache_dir, target.parent)  # a link planted in a shared cache is not written through
    os.replace(download, target)  # tells a later open the cache was not cleared
    return index, version, where


def _download_index(storage: Storage, index_path: str | None, destination: Path) -> None:
    """Copy the index file (``index_path``: a file, a folder holding index.json, or a URL) to ``destination``."""
    if not index_path:
        storage.download(INDEX_FILENAME, destination)
        return
    if "://" not in index_path:
        path = Path(os.path.expanduser(index_path))
        path = path / INDEX_FILENAME if path.is_dir() else path
        if not path.is_file():
            load_index(path)  # raises its error naming the path
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        return
    head, _, name = index_path.rstrip("/").rpartition("/")
    get_storage(head).download(name, destination)
