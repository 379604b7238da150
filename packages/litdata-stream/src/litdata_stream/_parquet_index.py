"""Indexing a folder of Parquet files so it streams as a dataset, without converting it.

The index is the one upstream LitData writes (``item_loader: "ParquetLoader"``): one chunk per
top-level ``.parquet`` file in key order, ``chunk_bytes`` = the file's size, ``chunk_size`` = its
rows, ``dim`` null, and ``config.data_format`` = each column's Arrow type (``str(type)``). Only
the footers are read, through the litdata-io storage of the folder. It lives below litdata-prep
because ``StreamingDataset`` indexes a Parquet folder that has no ``index.json`` on first use.
"""

from __future__ import annotations

import asyncio
import errno
import fnmatch
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from litdata_format import INDEX_FILENAME, DatasetIndex, IndexNotFoundError, complete_dataset, load_index, parse_index
from litdata_format.internal import write_file_atomic
from litdata_io import Dir, ObjectInfo, Storage, cache_dir_for, dataset_version, get_storage, resolve_dir
from litdata_io.internal import run_sync

__all__ = [
    "index_hf_dataset",
    "index_parquet_dataset",
    "local_dataset_index",
    "remote_parquet_index",
    "select_files",
    "split_file_pattern",
]

_SUFFIX = ".parquet"
_NONE_FOUND = "no .parquet file directly in the folder (nor, for hf://, in its subfolders)"
_MAGIC = b"PAR1"
_TAIL = 64 * 1024  # one ranged GET fetches the footer of nearly every file
_INSTALL = 'pip install "litdata-stream[parquet]"'


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet
    except ImportError:
        raise ImportError(f"indexing Parquet files needs pyarrow, which is not installed: {_INSTALL}") from None
    return pa


# -- building an index ------------------------------------------------------------------------------
def parquet_files(storage: Storage) -> list[ObjectInfo]:
    """The ``.parquet`` files of the folder of ``storage``, by key.

    Those directly in it, and for a Hugging Face folder (``hf://``) those in its subfolders too, as
    upstream indexes them (``train/0000.parquet``). Hidden files and folders are left out.
    """
    recursive = storage.url.startswith("hf://")
    return [
        o
        for o in storage.list("", recursive=recursive)
        if o.key.endswith(_SUFFIX)
        and (recursive or "/" not in o.key)
        and not any(part.startswith(".") for part in o.key.split("/"))
    ]


async def _footer(storage: Storage, info: ObjectInfo, gate: asyncio.Semaphore) -> bytes:
    """The file's metadata block with its length and magic (what pyarrow parses a footer from)."""
    where = storage.url_for(info.key)
    if info.size < 12:
        raise ValueError(f"{where}: {info.size} bytes is too short to be a Parquet file")
    async with gate:
        tail = await storage.aget_range(info.key, max(0, info.size - _TAIL), info.size)
        if tail[-4:] != _MAGIC:
            raise ValueError(f"{where}: not a Parquet file (it does not end with the PAR1 magic)")
        need = int.from_bytes(tail[-8:-4], "little") + 8
        if need > info.size - 4:
            raise ValueError(f"{where}: its footer length says {need - 8} bytes, more than the file holds")
        if need > len(tail):
            tail = await storage.aget_range(info.key, info.size - need, info.size)
    return tail[-need:]


async def _footers(storage: Storage, files: Sequence[ObjectInfo], workers: int) -> list[bytes]:
    gate = asyncio.Semaphore(max(1, workers))
    return list(await asyncio.gather(*(_footer(storage, f, gate) for f in files)))


class _NoParquetFilesError(FileNotFoundError, RuntimeError):
    """No Parquet file to index: a FileNotFoundError here, upstream's RuntimeError too."""


class _NoChunksError(FileNotFoundError, AssertionError):
    """A file pattern matching no file: a FileNotFoundError here, upstream's AssertionError too."""


def build_parquet_index(storage: Storage, files: Sequence[ObjectInfo], num_workers: int = 4) -> dict[str, Any]:
    """The ``index.json`` object for ``files`` of ``storage`` (all must share one schema)."""
    pa = _pyarrow()
    if not files:
        raise _NoParquetFilesError(
            f"No Parquet files were found in {storage.url}: {_NONE_FOUND}; point at the folder that holds the files"
        )
    footers = run_sync(_footers(storage, files, num_workers))
    chunks: list[dict[str, Any]] = []
    first: tuple[str, Any] | None = None
    for info, footer in zip(files, footers):
        where = storage.url_for(info.key)
        try:
            meta = pa.parquet.read_metadata(pa.BufferReader(footer))
            schema = meta.schema.to_arrow_schema()
        except Exception as error:  # pyarrow's ArrowInvalid and friends
            raise ValueError(f"{where}: cannot read its Parquet footer ({error})") from error
        if first is None:
            first = (where, schema)
        elif not schema.equals(first[1]):
            raise ValueError(f"{where}: its schema differs from {first[0]}'s ({_schema_diff(first[1], schema)}); "
                             "every Parquet file of a dataset must have the same columns and types")  # fmt: skip
        chunks.append({"chunk_bytes": info.size, "chunk_size": meta.num_rows, "dim": None, "filename": info.key})
    assert first is not None
    config = {
        "chunk_bytes": None,
        "chunk_size": None,
        "compression": None,
        "data_format": [str(field.type) for field in first[1]],
        "data_spec": None,
        "encryption": None,
        "item_loader": "ParquetLoader",
        "types": None,
    }
    return {"chunks": chunks, "config": config, "updated_at": str(time.time())}


def _schema_diff(a: Any, b: Any) -> str:
    types_a = {f.name: str(f.type) for f in a}
    types_b = {f.name: str(f.type) for f in b}
    parts = []
    for name in [*types_a, *(n for n in types_b if n not in types_a)]:
        left, right = types_a.get(name, "missing"), types_b.get(name, "missing")
        if left != right:
            parts.append(f"column {name!r}: {left} vs {right}")
    if not parts and list(types_a) != list(types_b):
        parts.append(f"column order {list(types_a)} vs {list(types_b)}")
    return "; ".join(parts) or "field metadata differs"


def _publish(path: Path, obj: Mapping[str, Any]) -> Path:
    write_file_atomic(path, json.dumps(obj, sort_keys=True).encode())
    return path


def _matching(path: Path, files: Sequence[ObjectInfo]) -> DatasetIndex | None:
    """The Parquet index at ``path`` if it lists exactly ``files`` (same names and sizes)."""
    try:
        index = load_index(path)
    except (FileNotFoundError, ValueError):
        return None
    listed = sorted((c.filename, c.chunk_bytes) for c in index.chunks)
    if index.item_loader != "ParquetLoader" or listed != sorted((f.key, f.size) for f in files):
        return None
    return index


# -- the public functions ---------------------------------------------------------------------------
def index_parquet_dataset(
    pq_dir_url: str,
    cache_dir: str | os.PathLike[str] | None = None,
    storage_options: dict[str, Any] | None = None,
    num_workers: int = 4,
    session_options: dict[str, Any] | None = None,
) -> str:
    """Write the ``index.json`` that lets ``StreamingDataset`` stream a folder of Parquet files.

    Args:
        pq_dir_url: the folder: a local path, ``s3://``, ``gs://``, ``hf://``, or any URL
            litdata-io opens. Only the ``.parquet`` files directly in it are indexed.
        cache_dir: a local folder to write ``index.json`` into. Default: the folder itself for
            a local path; for a writable bucket the index is uploaded next to the files (as
            upstream does) and also written here when given; for read-only ``hf://`` it is the
            dataset's cache folder (what :func:`index_hf_dataset` returns).
        storage_options: credentials and endpoint for the store.
        num_workers: footers fetched at once.
        session_options: boto3-style session options for ``s3://``.

    Returns:
        Where ``index.json`` was written (a local path or the bucket URL).

    Raises:
        FileNotFoundError: the folder holds no ``.parquet`` file.
        ValueError: a file is not Parquet, or two files have different schemas (the message
            names the file).
        ImportError: pyarrow is not installed.
    """
    location = resolve_dir(pq_dir_url)
    storage = get_storage(location, storage_options, session_options)
    if location.url is not None and storage.read_only and cache_dir is None:
        folder = cache_dir_for(location.url)
        _, version = remote_parquet_index(storage, folder)  # where StreamingDataset looks for it
        return str(folder / version / INDEX_FILENAME)
    obj = build_parquet_index(storage, parquet_files(storage), num_workers)
    parse_index(obj, storage.url_for(INDEX_FILENAME))  # what readers will check
    if location.url is None:
        assert location.path is not None
        target = Path(cache_dir) if cache_dir is not None else Path(location.path)
        return str(_publish(target / INDEX_FILENAME, obj))
    if storage.read_only and cache_dir is not None:
        return str(_publish(Path(cache_dir) / INDEX_FILENAME, obj))
    storage.put(INDEX_FILENAME, json.dumps(obj, sort_keys=True).encode())  # an object store's PUT is atomic
    if cache_dir is not None:
        _publish(Path(cache_dir) / INDEX_FILENAME, obj)
    return storage.url_for(INDEX_FILENAME)


def index_hf_dataset(
    dataset_url: str, cache_dir: str | os.PathLike[str] | None = None, storage_options: dict[str, Any] | None = None
) -> str:
    """Index a Hugging Face dataset folder of Parquet files; return the local folder holding ``index.json``.

    The folder is the one ``StreamingDataset(dataset_url, cache_dir=cache_dir)`` caches the files
    in (the subfolder for the files the repository lists now), so a later ``StreamingDataset``
    starts without reading any footer. An index already there is reused while the repository
    lists the same files (one listing request).

    Args:
        dataset_url: ``hf://datasets/<org>/<name>[/<path>]`` (a path ending in ``.parquet``
            indexes its folder).
        cache_dir: the cache root (default: ``$LITDATA_CACHE_DIR`` or ``~/.lightning/chunks``).
        storage_options: ``token``, ``endpoint``, ``revision``.
    """
    if not isinstance(dataset_url, str) or not dataset_url.startswith("hf://"):
        raise ValueError(
            f"Invalid Hugging Face dataset URL: index_hf_dataset({dataset_url!r}): the URL must start with "
            "hf://datasets/<org>/<name>"
        )
    folder_url, _ = split_file_pattern(dataset_url)
    url = resolve_dir(folder_url).url
    assert url is not None
    folder = cache_dir_for(url, cache_dir)
    _, version = remote_parquet_index(get_storage(url, storage_options), folder)
    return str(folder / version)


# -- what StreamingDataset uses -------------------------------------------------------------------
def split_file_pattern(input_dir: Any) -> tuple[Any, str | None]:
    """``("s3://b/data", "train-*.parquet")`` for ``"s3://b/data/train-*.parquet"``; other inputs unchanged.

    A local folder whose name ends in ``.parquet`` (Spark writes those) stays a folder.
    """
    if not isinstance(input_dir, str) or not input_dir.rstrip("/").endswith(_SUFFIX) or os.path.isdir(input_dir):
        return input_dir, None
    head, _, pattern = input_dir.rstrip("/").rpartition("/")
    return (head or "."), pattern


def select_files(index: DatasetIndex, pattern: str | None) -> DatasetIndex:
    """``index`` keeping the chunks whose file name (without its folders) matches the shell-style ``pattern``."""
    if pattern is None:
        return index
    chunks = [c for c in index.chunks if fnmatch.fnmatchcase(c.filename.rsplit("/", 1)[-1], pattern)]
    if not chunks:
        names = ", ".join(c.filename for c in index.chunks[:5])
        more = ", ..." if len(index.chunks) > 5 else ""
        raise _NoChunksError(  # upstream's words first ("No chunks"), then which files there are
            f"No chunks match {pattern!r}: {index.source}: no file matches {pattern!r} (it lists {names}{more})"
        )
    return DatasetIndex(chunks, index.config, index.updated_at, index.source)


def local_dataset_index(directory: Path, index_path: str | os.PathLike[str] | None = None,
                        cache_dir: Any = None) -> DatasetIndex:  # fmt: skip
    """The index of a local dataset folder, indexing a Parquet folder that has none (into it, else its cache folder)."""
    if index_path is not None or (directory / INDEX_FILENAME).is_file():
        return load_index(index_path if index_path is not None else directory)
    storage = get_storage(Dir(path=str(directory)))  # resolved already: no second look at the mount table
    files = parquet_files(storage)
    if not files:
        # Chunks written by hand (Cache / BinaryWriter) with only {rank}.index.json files: finish
        # the dataset as upstream's StreamingDataset does; with none, the usual "no index.json" error.
        return complete_dataset(directory)
    fallback = cache_dir_for(str(directory), cache_dir) / INDEX_FILENAME
    found = _matching(fallback, files)
    if found is not None:
        return found
    obj = build_parquet_index(storage, files)
    try:
        path = _publish(directory / INDEX_FILENAME, obj)
    except PermissionError:
        path = _publish(fallback, obj)
    except OSError as error:
        if error.errno not in (errno.EROFS, errno.EACCES):
            raise
        path = _publish(fallback, obj)
    return load_index(path)


def remote_parquet_index(storage: Storage, cache_dir: Path) -> tuple[DatasetIndex, str]:
    """The Parquet index of a remote folder that has no ``index.json``, and its cache version.

    The version (a subfolder of ``cache_dir``) comes from the files' names, sizes and etags, so a
    file rewritten in place gets a new one. An index kept there before is reused.
    """
    files = parquet_files(storage)
    if not files:
        raise IndexNotFoundError(
            f"The provided dataset `{storage.url}` doesn't contain any {INDEX_FILENAME} file "
            f"({storage.url_for(INDEX_FILENAME)}: no such object), and {_NONE_FOUND}; "
            "is this an optimized dataset (or a folder of Parquet files)?"
        )
    # Quotes differ between backends (a forked worker may use another client): not part of the identity.
    listing = json.dumps([[f.key, f.size, (f.etag or "").strip('"')] for f in files]).encode()
    version = dataset_version(storage.url, listing)
    target = cache_dir / version / INDEX_FILENAME
    found = _matching(target, files)
    if found is not None:
        return found, version
    return load_index(_publish(target, build_parquet_index(storage, files))), version
