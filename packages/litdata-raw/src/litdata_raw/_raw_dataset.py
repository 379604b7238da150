"""StreamingRawDataset: a map-style torch dataset over existing files, fetched in async batches."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from torch.utils.data import Dataset, get_worker_info

from litdata_format.internal import add_note, check_relative_path
from litdata_io import Storage, cache_dir_for, claim_version, dataset_version, get_storage, resolve_dir
from litdata_io.internal import is_disk_full, make_cache_folder, run_sync
from litdata_raw._file_index import INDEX_FILENAME, BaseIndexer, FileIndexer
from litdata_raw._file_list import FileList, FileMetadata

__all__ = ["StreamingRawDataset"]

# In-flight downloads shared by all DataLoader workers of one process tree when the user sets none.
_AGGREGATE_DOWNLOADS = 64
_MIN_DOWNLOADS_PER_WORKER = 8
# The slowest transfer rate the batch timeout allows for before it calls a batch hung.
_SLOWEST_BYTES_PER_SECOND = 25 * 1024 * 1024


class StreamingRawDataset(Dataset[Any]):
    """Stream existing files (JPEGs, masks, audio, JSONL, anything) from a folder or a bucket.

    One file is one sample by default and a sample is the file's bytes. Override :meth:`setup`
    to filter or group files (a group's sample is the list of its files' bytes); pass
    ``transform`` to decode. The file listing is cached as ``index.json.zstd`` (see
    :class:`~litdata_raw.FileIndexer`). Use it with a plain ``torch.utils.data.DataLoader``: a
    batch's files are fetched concurrently by :meth:`__getitems__`, and the sampler (for DDP a
    ``DistributedSampler``) decides which process reads which index.

    Args:
        input_dir: a local folder or any URL litdata-io opens (``s3://``, ``gs://``, ``azure://``,
            ``hf://``, ``local:``, ...).
        cache_dir: the cache root (default ``$LITDATA_CACHE_DIR`` or ``~/.lightning/chunks``); the
            dataset's index and cached files go into its own folder under it.
        indexer: how files are found (default :class:`~litdata_raw.FileIndexer`).
        storage_options: credentials, endpoint and IO settings (retries, timeouts) for the store.
        cache_files: keep downloaded remote files in the cache folder and reuse them (in a
            subfolder per listing: after ``recompute_index=True``, or a listing made again
            elsewhere, they are fetched anew and the old ones deleted).
        recompute_index: list the files again instead of using a cached index (after files were
            added or removed).
        transform: called on each sample (``bytes``, ``list[bytes]`` for a group, or the local
            path(s) with ``item_type="path"``); its result is the sample.
        max_concurrent_downloads: downloads in flight per process. Default: 64 shared across the
            DataLoader's workers, at least 8 per worker.
        max_prefetch: accepted for compatibility with upstream; no look-ahead is done.
        prefetch_cache_size: accepted for compatibility with upstream; unused.
        item_type: ``"bytes"`` (default) or ``"path"``: the local path of each file (remote files
            are downloaded into the cache first; needs ``cache_files=True``).
        hedge_delay: accepted for compatibility with upstream; no hedged requests are made.
        download_timeout: seconds a batch may take before a ``TimeoutError`` (raised for big files
            so that 25 MiB/s still fits); ``0`` disables it. Each request is retried by the
            store's own IO settings within it.
        range_parallel_threshold: accepted for compatibility with upstream; big files are fetched
            with parallel ranged requests only with ``cache_files=True`` (the store's
            ``parallel_threshold`` setting decides).
        range_chunk_size: accepted for compatibility with upstream; see ``range_parallel_threshold``.

    Raises:
        FileNotFoundError: a local ``input_dir`` does not exist.
        ValueError: no files were found, or an argument is out of range.
    """

    def __init__(
        self,
        input_dir: str | os.PathLike[str],
        cache_dir: str | os.PathLike[str] | None = None,
        indexer: BaseIndexer | None = None,
        storage_options: Mapping[str, Any] | None = None,
        cache_files: bool = False,
        recompute_index: bool = False,
        transform: Callable[[Any], Any] | None = None,
        max_concurrent_downloads: int | None = None,
        max_prefetch: int = 16,
        prefetch_cache_size: int | None = None,
        item_type: Literal["bytes", "path"] = "bytes",
        hedge_delay: float = 0.0,
        download_timeout: float = 120.0,
        range_parallel_threshold: int = 0,
        range_chunk_size: int = 8 * 1024 * 1024,
    ) -> None:
        if item_type not in ("bytes", "path"):
            raise ValueError(f"item_type must be 'bytes' or 'path', got {item_type!r}")
        if item_type == "path" and not cache_files:
            raise ValueError("item_type='path' requires cache_files=True (remote files must be saved to be opened)")
        if max_concurrent_downloads is not None and max_concurrent_downloads < 1:
            raise ValueError(f"max_concurrent_downloads must be >= 1 or None, got {max_concurrent_downloads}")
        for name, value in (
            ("max_prefetch", max_prefetch),
            ("hedge_delay", hedge_delay),
            ("download_timeout", download_timeout),
            ("range_parallel_threshold", range_parallel_threshold),
        ):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        self.input_dir = resolve_dir(input_dir)
        root = self.input_dir.url or self.input_dir.path
        if root is None:
            raise ValueError("input_dir is empty")
        self._root = root
        self._local = self.input_dir.url is None
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self.cache_dir = str(cache_dir_for(root, cache_dir))
        self.cache_files = cache_files
        self.item_type = item_type
        self.transform = transform
        self.max_concurrent_downloads = max_concurrent_downloads
        self.max_prefetch = max_prefetch
        self.prefetch_cache_size = prefetch_cache_size
        self.hedge_delay = hedge_delay
        self.download_timeout = download_timeout
        self.range_parallel_threshold = range_parallel_threshold
        self.range_chunk_size = range_chunk_size
        self.indexer = indexer or FileIndexer()
        self._storage: Storage | None = None if self._local else get_storage(root, self.storage_options)

        make_cache_folder(Path(self.cache_dir))  # not through another user's link (see docs/cache.md)
        # A FileList: paths and sizes in a few arrays, shared by forked workers without copies.
        self.files: Sequence[FileMetadata] = self.indexer.build_or_load_index(
            root, self.cache_dir, self.storage_options, recompute_index
        )
        self._files_dir = self.cache_dir
        if cache_files and not self._local:
            self._files_dir = str(claim_version(self.cache_dir, self._listing_version(), root))
        # setup() is annotated with upstream's list (see there): the FileList stands in for it.
        self.items: Sequence[FileMetadata] | list[list[FileMetadata]] = self.setup(
            cast("list[FileMetadata]", self.files)
        )
        if not isinstance(self.items, (list, FileList)):
            raise TypeError(f"setup() must return a list, but returned {type(self.items).__name__}")

    def _listing_version(self) -> str:
        """The cached files' subfolder: named from the cached index's bytes, else (a custom indexer) the listing."""
        try:
            identity = (Path(self.cache_dir) / INDEX_FILENAME).read_bytes()
        except FileNotFoundError:
            identity = json.dumps([[f.path, f.size] for f in self.files]).encode()
        return dataset_version(self._root, identity)

    def setup(self, files: list[FileMetadata]) -> Sequence[FileMetadata] | list[list[FileMetadata]]:
        """Turn the listed files into samples. Override it to filter or group files.

        Args:
            files: every file the indexer found, sorted by path. Annotated ``list`` as upstream's
                (so overrides written for upstream type-check), it is a read-only
                :class:`~litdata_raw.FileList` at run time: indexable, iterable, sliceable like a
                list, each entry a :class:`FileMetadata` made when read; no in-place changes.

        Returns:
            A list of :class:`FileMetadata` (one file per sample) or of lists of them (one group
            per sample, whose sample is the list of the files' contents in that order), or
            ``files`` itself or a slice of it.
        """
        return files

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """The samples at ``indices``, in that order, their files fetched concurrently."""
        indices = [int(i) for i in indices]
        for index in indices:
            if not 0 <= index < len(self.items):
                raise IndexError(  # upstream's words first: code written for upstream matches them
                    f"Index {index} out of range for dataset with length {len(self.items)}: index {index} is out "
                    f"of range for a dataset of {len(self.items)} samples ({self.input_dir.url or self.input_dir.path})"
                )
        if self._storage is None:
            # Local files: plain reads in this thread beat a hop to the event loop and a thread per
            # file (small files come from the page cache in microseconds).
            return [self._local_sample(i) for i in indices]
        return run_sync(self._fetch_batch(self._storage, indices))

    def _local_sample(self, index: int) -> Any:
        item = self.items[index]
        data = [self._read_local(meta) for meta in self._files_of(item)]
        sample: Any = data[0] if isinstance(item, FileMetadata) else data
        return self._transformed(index, sample)

    def _transformed(self, index: int, sample: Any) -> Any:
        """``transform(sample)`` (or ``sample``); an error keeps its type, noted with the sample and its files."""
        if self.transform is None:
            return sample
        try:
            return self.transform(sample)
        except Exception as error:
            files = ", ".join(meta.path for meta in self._files_of(self.items[index]))
            add_note(error, f"transform failed on sample {index} ({files})")
            raise

    def _read_local(self, meta: FileMetadata) -> bytes | str:
        if self.item_type == "path":
            return meta.path
        try:
            with open(meta.path, "rb") as handle:
                return handle.read()
        except FileNotFoundError as err:
            raise _gone(meta, err) from None

    # -- downloads --------------------------------------------------------------------------------
    def _concurrency(self) -> int:
        if self.max_concurrent_downloads is not None:
            return self.max_concurrent_downloads
        info = get_worker_info()
        workers = info.num_workers if info is not None else 1
        return max(_MIN_DOWNLOADS_PER_WORKER, _AGGREGATE_DOWNLOADS // max(1, workers))

    def _timeout(self, indices: list[int]) -> float | None:
        if not self.download_timeout:
            return None
        total = sum(f.size for i in indices for f in self._files_of(self.items[i]))
        return max(self.download_timeout, 3.0 * total / _SLOWEST_BYTES_PER_SECOND)

    def _files_of(self, item: Any) -> list[FileMetadata]:
        if isinstance(item, FileMetadata):
            return [item]
        if isinstance(item, list) and all(isinstance(f, FileMetadata) for f in item):
            return item
        raise TypeError(f"setup() items must be FileMetadata or list[FileMetadata], found {type(item).__name__}")

    async def _fetch_batch(self, storage: Storage, indices: list[int]) -> list[Any]:
        gate = asyncio.Semaphore(self._concurrency())
        work = asyncio.gather(*(self._sample(storage, i, gate) for i in indices))
        timeout = self._timeout(indices)
        try:
            return list(await asyncio.wait_for(work, timeout))
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"fetching {len(indices)} samples from {self._root} took more than {timeout:.0f}s "
                "(raise download_timeout, or pass 0 to wait forever)"
            ) from None

    async def _sample(self, storage: Storage, index: int, gate: asyncio.Semaphore) -> Any:
        item = self.items[index]
        if isinstance(item, FileMetadata):
            data: Any = await self._fetch(storage, item, gate)
        else:
            data = list(await asyncio.gather(*(self._fetch(storage, f, gate) for f in self._files_of(item))))
        if self.transform is not None:
            # The transform may release the GIL (image decoders do): let it overlap other downloads.
            return await asyncio.to_thread(self._transformed, index, data)
        return data

    def _key(self, path: str) -> str:
        base = self._root.rstrip("/") + "/"
        if not path.startswith(base):
            raise ValueError(
                f"{path} is not inside {self._root}: the cached index belongs to another location; "
                "rebuild it with recompute_index=True"
            )
        # The listing was checked as loaded; setup() may have made other items.
        return check_relative_path(path[len(base) :], f"file {path}", "the path after the dataset's folder")

    async def _fetch(self, storage: Storage, meta: FileMetadata, gate: asyncio.Semaphore) -> bytes | str:
        try:
            key = self._key(meta.path)
            if not self.cache_files:
                async with gate:
                    return await storage.aget(key)
            local = Path(self._files_dir) / key
            if _kept_size(local) != meta.size:
                async with gate:
                    await storage.adownload(key, local)
            return str(local) if self.item_type == "path" else await asyncio.to_thread(local.read_bytes)
        except FileNotFoundError as err:
            raise _gone(meta, err) from None
        except OSError as err:
            if not is_disk_full(err):
                raise
            raise OSError(
                err.errno,
                f"no space left in the cache folder for {meta.path} ({meta.size} bytes): cache_files=True keeps "
                "every file read; free space on that disk, pass cache_dir= a folder on a larger one, or "
                "cache_files=False to read the files without keeping them",
                self._files_dir,
            ) from err


def _kept_size(local: Path) -> int | None:
    """The size of the kept copy ``local``, None unless it is a regular file (a link planted there is not ours)."""
    try:
        found = os.lstat(local)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


def _gone(meta: FileMetadata, err: OSError) -> FileNotFoundError:
    return FileNotFoundError(
        f"{meta.path} is listed in the cached index but is gone ({err}); rebuild the index with recompute_index=True"
    )
