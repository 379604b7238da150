"""Where a dataset's chunks come from, resolved once, when the dataset is made.

The :class:`ChunkOrigin` travels with the dataset to every DataLoader worker, which opens its own
source from it (:func:`open_source`) and never downloads or parses ``index.json`` again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litdata_io import Dir, cache_dir_for, get_storage, resolve_dir
from litdata_stream._parquet_index import local_dataset_index, select_files
from litdata_stream._sources.remote import RemoteSource, fetch_index
from litdata_stream._sources.source import ChunkOpener, ChunkOrigin, ChunkSource, LocalSource

__all__ = ["locate_chunks", "open_source"]


def locate_chunks(
    input_dir: Any,
    resolved: Dir,
    *,
    in_place: bool = True,
    cache_dir: Any = None,
    file_pattern: str | None = None,
    **options: Any,
) -> ChunkOrigin:
    """Read the index of ``input_dir`` (``resolved`` by the dataset), fetching it into the cache folder for a URL.

    ``in_place`` False copies a local folder's chunks through the cache (as a ``local:`` network drive's);
    ``options`` are the other fields of :class:`ChunkOrigin`, kept on it as given.

    Raises:
        FileNotFoundError: a local ``input_dir`` is not a directory.
    """
    cache_setting = cache_dir.path if isinstance(cache_dir, Dir) else cache_dir
    index_path = options.get("index_path")
    if resolved.url is None and resolved.path is not None:
        directory = Path(resolved.path)
        if not directory.is_dir():
            # Opens with upstream's words, which code written for upstream may match.
            raise FileNotFoundError(
                f"The provided dataset path `{directory}` does not exist: input_dir {str(input_dir)!r} is not a "
                "directory (nor a URL such as s3://bucket/path)"
            )
        if in_place:
            index = select_files(local_dataset_index(directory, index_path, cache_setting), file_pattern)
            return ChunkOrigin(index, directory=directory, **options)
        resolved = resolve_dir("local:" + str(directory))  # LITDATA_POSIX_FAST=0: through the cache
    url = resolved.url
    if url is None:
        raise ValueError(f"input_dir {input_dir!r} resolved to no URL")
    folder = Path(resolved.path) if resolved.path is not None else cache_dir_for(url, cache_setting)
    storage = get_storage(url, options.get("storage_options"), options.get("session_options"))
    index, version, _ = fetch_index(storage, folder, index_path)
    index = select_files(index, file_pattern)
    return ChunkOrigin(index, url=url, cache_dir=folder, version=version, **options)


def open_source(origin: ChunkOrigin, opener: ChunkOpener) -> ChunkSource:
    """A new chunk source over ``origin`` for this process, opening chunks with ``opener``."""
    if origin.directory is not None:
        return LocalSource(origin.directory, origin.index, origin.encryption, opener=opener, verify=origin.verify,
                           readahead=origin.max_pre_download)  # fmt: skip
    return RemoteSource.open(origin, opener)
