"""The file index of a raw dataset: which files it has and how big they are.

Listing a bucket with millions of objects takes minutes, so the listing is done once and kept as
``index.json.zstd``: zstd-compressed UTF-8 JSON, the same layout upstream LitData writes and reads::

    {"source": "s3://bucket/files", "created_at": 1718000000.0,
     "files": [{"path": "s3://bucket/files/a.jpg", "size": 1234}, ...]}

``path`` is the file's full URL (or absolute local path). The index is kept in the dataset's
local cache folder, and for remote datasets also next to the data (``<input_dir>/index.json.zstd``)
so other machines skip the listing too. Local datasets get no copy written into the data folder.
The local copy of a remote index is used only while the remote one is the same object (a hidden
``.index.json.zstd.remote`` file records its etag and size; one HEAD request checks them), so a
dataset indexed again elsewhere (``recompute_index=True``) is never read from a stale listing.
"""

from __future__ import annotations

import io
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litdata_format.internal import atomic_file, check_relative_path, write_file_atomic
from litdata_io import ObjectInfo, Storage, get_storage, resolve_dir
from litdata_raw._file_index_codec import read_index, write_index
from litdata_raw._file_list import FileList, FileListBuilder, FileMetadata

__all__ = [
    "INDEX_FILENAME",
    "BaseIndexer",
    "FileIndexer",
    "FileList",
    "FileMetadata",
    "decode_index",
    "encode_index",
]

logger = logging.getLogger("litdata_raw")


class MissingFolderError(FileNotFoundError, ValueError):
    """A local ``input_dir`` that does not exist (also the ``ValueError`` upstream raises for it)."""


INDEX_FILENAME = "index.json.zstd"
_REMOTE_TAG = ".index.json.zstd.remote"  # which remote object the local copy is


# Objects asked for per listing request, and how often a long listing says how far it got.
_PAGE_SIZE = 1000
_PROGRESS_EVERY = 5.0


def encode_index(files: Sequence[FileMetadata], source: str) -> bytes:
    """The bytes of an ``index.json.zstd`` listing ``files`` of the dataset at ``source``."""
    buffer = io.BytesIO()
    write_index(buffer, files, source)
    return buffer.getvalue()


def decode_index(data: bytes, name: str) -> FileList:
    """The files an ``index.json.zstd`` lists.

    Raises:
        ValueError: the bytes are not a zstd-compressed index (``name`` says which file).
    """
    return read_index(io.BytesIO(data), name)


def _join(root: str, key: str) -> str:
    if "://" in root or root.startswith("local:"):
        return f"{root.rstrip('/')}/{key}"
    return os.path.join(root, *key.split("/"))  # not pathlib: this runs per file of a big folder


class BaseIndexer(ABC):
    """How a raw dataset finds its files. Subclass it and implement :meth:`discover_files`."""

    @abstractmethod
    def discover_files(self, input_dir: str, storage_options: Mapping[str, Any] | None) -> Sequence[FileMetadata]:
        """List the dataset's files (no cache involved).

        Return a list of :class:`FileMetadata`, or a :class:`FileList` to hold millions of them
        compactly.

        Args:
            input_dir: the dataset's folder or URL.
            storage_options: options for the storage backend (credentials, endpoint, ...).
        """

    def build_or_load_index(
        self,
        input_dir: str,
        cache_dir: str,
        storage_options: Mapping[str, Any] | None,
        recompute_index: bool = False,
    ) -> FileList:
        """The dataset's files: from the cached index if there is one, else listed and cached.

        Looks in ``cache_dir`` first, then (remote datasets) next to the data. A missing or
        unreadable index is rebuilt; ``recompute_index=True`` always rebuilds and overwrites both
        copies.

        Args:
            input_dir: the dataset's resolved URL or absolute local path.
            cache_dir: the dataset's own cache folder (created if needed).
            storage_options: credentials, endpoint and IO settings for the store.
            recompute_index: list the files again even if an index is cached.

        Raises:
            ValueError: no files were found.
        """
        local_index = Path(cache_dir) / INDEX_FILENAME
        remote = None if _is_local(input_dir) else get_storage(input_dir, storage_options)
        if not recompute_index:
            files, listing = _load_cached(local_index, remote)
            # A listing of another folder (a cache_dir shared by two datasets) is not this one's.
            if files and _is_listing_of(files, input_dir, listing):
                return files
        files = FileList.from_files(self.discover_files(input_dir, storage_options))
        _is_listing_of(files, input_dir, f"the listing of {input_dir}")  # keys that leave it: refused here too
        if not files:
            raise ValueError(
                f"No files found in {input_dir}: put the files there, or check the path "
                "(and the indexer's extensions filter)"
            )
        with atomic_file(local_index) as handle:
            write_index(handle, files, input_dir)
        local_index.with_name(_REMOTE_TAG).unlink(missing_ok=True)
        if remote is not None:
            try:
                remote.upload(local_index, INDEX_FILENAME)
                write_file_atomic(local_index.with_name(_REMOTE_TAG), _tag(remote.head(INDEX_FILENAME)))
            except Exception as err:  # read-only credentials are common: the local copy is enough
                logger.warning(
                    "could not upload %s (continuing with the local copy): %s", remote.url_for(INDEX_FILENAME), err
                )
        logger.info("indexed %s files of %s", f"{len(files):,}", input_dir)
        return files


def _is_local(input_dir: str) -> bool:
    return "://" not in input_dir and not input_dir.startswith("local:")


def _tag(info: ObjectInfo) -> bytes:
    return f"{(info.etag or '').strip(chr(34))} {info.size} {info.mtime}".encode()


def _read_local(local_index: Path) -> FileList | None:
    try:
        with open(local_index, "rb") as handle:
            return read_index(handle, str(local_index))
    except FileNotFoundError:
        return None
    except ValueError as err:
        logger.warning("ignoring the cached index: %s", err)
        return None


def _is_listing_of(files: FileList, root: str, listing: str) -> bool:
    """Whether every path of ``files`` is a file inside the dataset folder ``root``.

    A path outside ``root`` makes it another folder's listing (a shared ``cache_dir``): False. A path
    that starts with ``root`` but leaves it (``root/../x``, ``root//abs``) raises a ValueError naming
    ``listing`` and the entry: its paths are joined to the cache folder.
    """
    base = _join(root, "")
    suspects = files.suspects(base)  # on the buffers at C speed: most listings have none
    for position in range(len(files)) if suspects is None else suspects:
        path = files.path(position)
        if not path.startswith(base):
            return False
        check_relative_path(path[len(base) :], listing, f"files[{position}] ({path}): the path after {base}")
    return True


def _load_cached(local_index: Path, remote: Storage | None) -> tuple[FileList | None, str]:
    """The cached listing (None if none) and where it was read: the local copy, unless the remote one changed."""
    local = _read_local(local_index)
    if remote is None:
        return local, str(local_index)
    tag_file = local_index.with_name(_REMOTE_TAG)
    where = remote.url_for(INDEX_FILENAME)
    try:
        tag = _tag(remote.head(INDEX_FILENAME))
        if local and tag_file.is_file() and tag_file.read_bytes() == tag:
            return local, f"{local_index} (a copy of {where})"
        # Downloaded to a file and parsed from it: the index of a big bucket is never in memory whole.
        fresh = local_index.with_name(f".{INDEX_FILENAME}.{os.getpid()}.download")
        remote.download(INDEX_FILENAME, fresh)
    except FileNotFoundError:
        return local, str(local_index)  # never shared (read-only credentials): the local listing is the only one
    except Exception as err:  # listing will hit the same store and report the problem clearly
        logger.warning("could not read %s: %s", where, err)
        return local, str(local_index)
    try:
        with open(fresh, "rb") as handle:
            files = read_index(handle, where)
        os.replace(fresh, local_index)
    except ValueError as err:
        logger.warning("ignoring the remote index: %s", err)
        return local, str(local_index)
    finally:
        fresh.unlink(missing_ok=True)
    write_file_atomic(tag_file, tag)
    return files, where


class FileIndexer(BaseIndexer):
    """Lists every file under the input folder, optionally only some extensions.

    Args:
        max_depth: how many folder levels to descend (a file directly in the input folder is at
            depth 1). Applies to local folders too.
        extensions: keep only these suffixes, case-insensitive (``[".jpg", ".png"]``).
    """

    def __init__(self, max_depth: int = 5, extensions: Sequence[str] | None = None) -> None:
        if max_depth < 1:
            raise ValueError(f"max_depth must be >= 1, got {max_depth}")
        self.max_depth = max_depth
        self.extensions = [e.lower() if e.startswith(".") else "." + e.lower() for e in (extensions or [])]

    def discover_files(self, input_dir: str, storage_options: Mapping[str, Any] | None) -> FileList:
        """List the files of ``input_dir`` (a local folder or any URL litdata-io opens).

        The listing is read a page at a time into a compact :class:`FileList`; a listing that
        takes more than a few seconds logs its progress (logger ``litdata_raw``, level INFO).

        Args:
            input_dir: the dataset's folder or URL.
            storage_options: options for the storage backend (credentials, endpoint, ...).
        """
        resolved = resolve_dir(input_dir)
        root = resolved.url or resolved.path
        if root is None:
            raise ValueError("input_dir is empty")
        if resolved.url is None:
            folder = Path(root)
            if not folder.exists():
                raise MissingFolderError(f"No files found in {root}: input_dir {root} does not exist")
            if not folder.is_dir():
                raise NotADirectoryError(f"input_dir {root} is a file, not a folder of files")
        storage = get_storage(root, storage_options)
        base = _join(root, "")
        # The key's "/" are the path's separators on POSIX: no join per file.
        join = (lambda key: base + key) if ("://" in root or os.sep == "/") else (lambda key: _join(root, key))
        found = FileListBuilder(base)
        listed = 0
        started = last_report = time.monotonic()
        for page in storage.list_pages("", recursive=True, page_size=_PAGE_SIZE):
            for info in page:
                if self._keep(info.key):
                    found.add(join(info.key), info.size)
            listed += len(page)
            now = time.monotonic()
            if now - last_report >= _PROGRESS_EVERY:
                logger.info("listed %s files of %s so far (%.0f s)", f"{listed:,}", root, now - started)
                last_report = now
        if last_report != started:
            logger.info("listed %s files of %s in %.0f s", f"{listed:,}", root, time.monotonic() - started)
        return found.build()

    def _keep(self, key: str) -> bool:
        name = key.rsplit("/", 1)[-1]
        if name == INDEX_FILENAME or key.count("/") >= self.max_depth:
            return False
        return not self.extensions or any(name.lower().endswith(ext) for ext in self.extensions)
