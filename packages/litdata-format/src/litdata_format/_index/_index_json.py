"""``index.json``: its file names, reading, validating, writing atomically, and merging indexes.

A dataset directory holds chunk files (``chunk-{rank}-{n}.bin``) and one ``index.json``
(``{"chunks", "config", "updated_at"}``). Each writer first writes ``{rank}.index.json``; the
merge concatenates their chunks in rank order, checks they share one layout and publishes
``index.json`` by writing a temporary file and renaming it, so a reader never sees half an
index. Every package names these files and merges indexes through this module.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from litdata_format._atomic import write_file_atomic
from litdata_format._chunks._mds import parse_mds_index
from litdata_format._guards import is_any_list, is_str_dict
from litdata_format._index._dataset_index import INDEX_FILENAME, ChunkInfo, ChunkTable, DatasetIndex, int_field
from litdata_format._index._scan import scan_index
from litdata_format._index._skim import CHECK_EVERY_KEY_BELOW, DuplicateKeyError, Read, loads_unique, skim_object

__all__ = [
    "IndexNotFoundError",
    "cached_chunk_sizes",
    "check_chunk_file",
    "chunk_name",
    "complete_dataset",
    "is_complete_dataset",
    "layout_differences",
    "load_index",
    "merge_indexes",
    "parse_chunk_name",
    "parse_index",
    "plain_chunk_name",
    "rank_index_name",
    "read_index_file",
    "write_json_atomic",
]

_RANK_INDEX = re.compile(rf"^(\d+)\.{re.escape(INDEX_FILENAME)}$")
_CHUNK_NAME = re.compile(r"^chunk-(\d+)-(\d+)(?:\.[A-Za-z0-9:]+)?\.bin$")


def chunk_name(rank: int, number: int, compression: str | None = None) -> str:
    """The file name of chunk ``number`` of writer ``rank``, as upstream names them.

    ``chunk-{rank}-{number}.bin``, or ``chunk-{rank}-{number}.{compression}.bin`` when the whole
    file is compressed.
    """
    return f"chunk-{rank}-{number}.{compression}.bin" if compression else f"chunk-{rank}-{number}.bin"


def parse_chunk_name(name: str) -> tuple[int, int] | None:
    """``(rank, number)`` of a file named by :func:`chunk_name`, or None for any other name."""
    match = _CHUNK_NAME.match(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def rank_index_name(rank: int) -> str:
    """The file name of writer ``rank``'s own index, merged into ``index.json`` when every writer is done."""
    return f"{rank}.{INDEX_FILENAME}"


def plain_chunk_name(info: ChunkInfo, compression: str | None) -> str:
    """The file name the chunk of ``info`` has once decompressed (``compression``: the dataset's, if any)."""
    if compression and info.filename.endswith(f".{compression}.bin"):
        return info.filename[: -len(f".{compression}.bin")] + ".bin"
    return info.filename


def cached_chunk_sizes(info: ChunkInfo) -> tuple[int, ...]:
    """The sizes the file of ``info`` may have once stored plain (under :func:`plain_chunk_name`).

    Empty when the index does not tell. ``chunk_bytes`` is the file's size (decompressed, for a
    whole-file compressed chunk). Upstream writers before October 2024 (LitData issue #393) left
    the header, ``4 * (chunk_size + 2)`` bytes, out of it, so that size is accepted too. A
    compressed MosaicML shard is kept compressed and its index gives only the decompressed size.
    """
    if info.chunk_bytes <= 0 or info.extra.get("raw_filename", info.filename) != info.filename:
        return ()
    return (info.chunk_bytes, info.chunk_bytes + 4 * (info.chunk_size + 2))


def check_chunk_file(path: str | os.PathLike[str], filename: str, source: str) -> None:
    """Refuse chunk ``filename`` stored at ``path`` if it resolves outside its folder or is not a regular file.

    The folder is ``path`` without the parts of ``filename`` (the dataset or cache folder), so a
    symlink to elsewhere, or a FIFO or device that would block or never end, is refused before
    it is opened. A missing file is left to the opener, which says so.
    """
    if "/" not in filename:
        # The common case, without resolving two paths: a direct entry of the folder that is a
        # regular file (lstat does not follow a link) is inside it; a missing one is the opener's.
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                return
        except FileNotFoundError:
            return
    path = Path(path)
    root = path
    for _ in filename.split("/"):
        root = root.parent
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise ValueError(
            f"{source}: chunk {filename} at {path} resolves to {real}, outside the folder {real_root}; "
            "refusing to read it (copy the file into the dataset instead of linking it)"
        )
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"{source}: chunk {filename} at {path} is not a regular file ({_kind(mode)}); refusing to read it"
        )


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK,
                       "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):  # fmt: skip
        if test(mode):
            return name
    return f"mode {oct(mode)}"


class IndexNotFoundError(FileNotFoundError, ValueError):
    """A dataset folder has no ``index.json``.

    A ``ValueError`` as upstream LitData raises for a folder without one, and a
    ``FileNotFoundError`` for what it is.
    """


def _check_data_format(formats: Any, source: str) -> None:
    from litdata_format._samples._serializers import NUMPY_DTYPES, TORCH_DTYPE_NAMES

    if not is_any_list(formats):
        raise ValueError(f"{source}: config.data_format must be a list of serializer names, got {formats!r:.100}")
    tables: dict[str, Mapping[int, Any]] = {"no_header_numpy": NUMPY_DTYPES, "no_header_tensor": TORCH_DTYPE_NAMES}
    for number, fmt in enumerate(formats):
        where = f"{source}: config.data_format[{number}]"
        if not isinstance(fmt, str) or not fmt:
            raise ValueError(f"{where} must be a serializer name such as 'int' or 'numpy', got {fmt!r:.100}")
        name, _, suffix = fmt.partition(":")
        table = tables.get(name)
        if table is not None and not (suffix.isdigit() and int(suffix) in table):
            raise ValueError(f"{where} = {fmt!r:.100}: {suffix!r:.20} is not a known dtype index of {name}")


def _check_config(config: dict[str, Any], source: str) -> None:
    """Check the types of the config fields readers use; unknown fields are kept as they are."""
    for key in ("data_format", "data_spec"):
        if key not in config:
            raise ValueError(f"{source}: config is missing {key!r}")
    _check_data_format(config["data_format"], source)
    expected: dict[str, tuple[type, ...]] = {
        "data_spec": (str,),
        "compression": (str,),
        "encryption": (dict,),
        "item_loader": (str,),
        "compression_level": (str, int),
    }
    for key, types in expected.items():
        value = config.get(key)
        if value is not None and not isinstance(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise ValueError(f"{source}: config.{key} must be null or a {names}, got {value!r:.100}")
    for key in ("chunk_size", "chunk_bytes"):
        int_field(config, key, f"{source}: config", optional=True)
    compression = config.get("compression")
    if compression is not None and config.get("item_loader") != "ParquetLoader":
        from litdata_format._chunks._compression import zstd_level

        try:
            zstd_level(compression)
        except ValueError as err:
            raise ValueError(f"{source}: config.compression: {err}") from None


def _empty_config() -> dict[str, Any]:
    """The config of a dataset without a sample, as upstream's optimize writes it."""
    return {"data_format": [], "data_spec": None}


def parse_index(obj: Any, source: str = INDEX_FILENAME) -> DatasetIndex:
    """Validate an ``index.json`` (LitData or MosaicML MDS) and return its contents.

    The file's bytes are scanned without a dict per chunk when the entries are of the common
    shape (``_scan``); any other index goes through ``json.loads``, as does one the scan
    refuses, so the errors are the same either way.

    Args:
        obj: what ``json.loads`` made of the file, or the file's bytes.
        source: where it was read from, for error messages.

    Raises:
        ValueError: ``obj`` is not a valid index; the message names ``source`` and the field.
    """
    if isinstance(obj, bytes):
        raw = memoryview(obj)
        return _parsed(lambda offset, count: raw[offset : offset + count], len(raw), source, lambda: obj)
    return _checked(obj, source, None)


def _parsed(read: Read, size: int, source: str, whole: Callable[[], bytes]) -> DatasetIndex:
    """The index in the bytes ``read`` gives.

    Scanned (``_scan``), else its top level walked (``_skim``: the values no reader
    uses are not built), else (not walkable) ``whole()`` parsed by ``json.loads``, which says
    what is wrong.
    """
    try:
        scanned = scan_index(read, size)
        if scanned is not None:
            return _checked(scanned[1], source, scanned[0])
        skimmed = skim_object(read, size)
    except DuplicateKeyError as err:
        raise _twice(source, err) from None
    return _checked(skimmed if skimmed is not None else _decode(whole(), source), source, None)


def _checked(obj: Any, source: str, table: ChunkTable | None) -> DatasetIndex:
    """The index of the decoded ``obj``; ``table``: its chunks, when scanned (``obj`` has no ``chunks`` then)."""
    if not is_str_dict(obj):
        raise ValueError(f"{source}: expected a JSON object, got {type(obj).__name__}")
    if table is None and "shards" in obj and "chunks" not in obj:
        return parse_mds_index(obj, source)
    chunks, config = obj.get("chunks"), obj.get("config")
    if table is None and chunks == [] and "config" in obj and config is None:
        config = _empty_config()
    listed = chunks if is_any_list(chunks) else None
    if (table is None and listed is None) or not is_str_dict(config):
        keys = sorted(obj) if table is None else sorted(["chunks", *obj])
        raise ValueError(f"{source}: an index needs a 'chunks' list and a 'config' object (keys: {keys})")
    _check_config(config, source)
    infos = table if table is not None else ChunkTable.parse(listed or [], source)
    updated = obj.get("updated_at")
    return DatasetIndex(infos, config, None if updated is None else str(updated), source)


def load_index(path: str | os.PathLike[str]) -> DatasetIndex:
    """Read ``index.json`` from a dataset directory (or the file itself).

    An index of the common shape is read in windows of a few MiB (``_scan``), so the
    file is never held whole; any other is read and parsed whole.

    Args:
        path: the dataset folder, or its ``index.json``.

    Raises:
        IndexNotFoundError: the folder has no ``index.json`` (the message says if rank indexes wait to be merged).
        ValueError: the file is not a valid index (the message names the file and what is wrong).
    """
    path = Path(path)
    if path.is_dir():
        path = path / INDEX_FILENAME
    try:
        if path.exists() and not path.is_file():  # a FIFO would block the read forever
            raise ValueError(f"{path}: index.json is not a regular file; refusing to read it")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        hint = ""
        if path.parent.is_dir() and any(_RANK_INDEX.match(p.name) for p in path.parent.iterdir()):
            hint = " It has per-rank index files: finish it with litdata_format.complete_dataset(dir)."
        raise IndexNotFoundError(
            f"The provided dataset `{path.parent}` doesn't contain any {INDEX_FILENAME} file ({path}: no index.json "
            f"here); is this an optimized dataset?{hint}"
        ) from None
    return _read_index(fd, str(path))


def read_index_file(path: str | os.PathLike[str], source: str) -> DatasetIndex:
    """The index in the file ``path`` (a download), read as :func:`load_index` reads one; errors name ``source``."""
    return _read_index(os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)), source)


def _read_index(fd: int, source: str) -> DatasetIndex:
    """The index in the file open as ``fd`` (closed here): scanned window by window, else parsed whole."""
    try:
        size = os.fstat(fd).st_size
        return _parsed(lambda offset, count: os.pread(fd, count, offset), size, source, lambda: _read_all(fd, size))
    finally:
        os.close(fd)


def _twice(source: str, err: DuplicateKeyError) -> ValueError:
    return ValueError(
        f"{source}: index.json has the key {err.key!r} twice in one object (two indexes joined into one, or an "
        "edited file): which one is meant cannot be told, so it is refused; rewrite the index"
    )


def _read_all(fd: int, size: int) -> bytes:
    """The whole file open as ``fd``, from its start (``size`` is what fstat said; it may have grown)."""
    parts: list[bytes] = []
    offset = 0
    while True:
        part = os.pread(fd, max(size - offset, 1 << 16), offset)
        if not part:
            return b"".join(parts)
        parts.append(part)
        offset += len(part)


def _decode(raw: bytes, source: str) -> Any:
    # A key twice in one object is refused (see CHECK_EVERY_KEY_BELOW).
    unique = len(raw) <= CHECK_EVERY_KEY_BELOW or raw.count(b'"chunks"') > 1 or raw.count(b'"config"') > 1
    try:
        return loads_unique(raw.decode("utf-8")) if unique else json.loads(raw.decode("utf-8"))
    except DuplicateKeyError as err:
        raise _twice(source, err) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{source}: index.json is not valid JSON ({err}); it may be truncated or damaged") from None
    except RecursionError:
        raise ValueError(f"{source}: index.json nests its values too deeply to be an index") from None


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and a rename."""
    write_file_atomic(path, json.dumps(obj, sort_keys=True).encode())


def rank_index_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``{rank}.index.json`` files of a dataset directory, in rank order."""
    found = [p for p in Path(directory).iterdir() if _RANK_INDEX.match(p.name)]
    return sorted(found, key=lambda p: int(p.name.split(".", 1)[0]))


# Config fields that say how a dataset was cut into chunks (or frames) or summarise its rows, not
# how an item is read: upstream's reader ignores them, so indexes that differ only there hold the
# same layout. The compression level is part of the layout: it says what kind of chunk a reader meets.
_NOT_LAYOUT = frozenset({"chunk_size", "chunk_bytes", "compression_batch_size", "types"})


def layout_differences(config: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The config fields in which two indexes store their items differently; empty when one reader reads both.

    Every field but the chunking ones counts, a missing one being null. ``pil`` and ``jpeg`` leaves
    differ (raw pixels vs a JPEG file): a reader, upstream's too, decodes every item of a dataset
    with the one serializer per leaf its config names.

    Args:
        config: one index's ``config``.
        other: the other index's ``config``.
    """
    keys = (set(config) | set(other)) - _NOT_LAYOUT
    return sorted(key for key in keys if config.get(key) != other.get(key))


def merge_indexes(parts: Sequence[DatasetIndex], source: str, hint: str = "") -> DatasetIndex:
    """One index holding the chunks of ``parts``, part after part in the given order.

    Item numbers follow that order (each part's chunks in its own order), so callers list an
    existing dataset first and writers by rank. Parts without chunks (a writer that got no
    sample) add nothing; the others must share one layout (:func:`layout_differences`), and the
    merged config is the first one's.

    Args:
        parts: the indexes to merge, in item order.
        source: where the merged index goes, for error messages.
        hint: what to do about a layout mismatch, appended to its error.

    Raises:
        ValueError: a part stores its samples differently from the first; the message names both,
            the fields that differ and ends with ``hint``.
    """
    filled = [part for part in parts if part.chunks]
    if not filled:
        config = parts[0].config if parts else _empty_config()
        return DatasetIndex([], config, str(time.time()), source)
    first = filled[0]
    for part in filled[1:]:
        diff = layout_differences(first.config, part.config)
        if diff:
            fields = "; ".join(f"{key}: {first.config.get(key)!r} vs {part.config.get(key)!r}" for key in diff)
            raise ValueError(
                f"{source}: The config isn't consistent between chunks: {part.source} has a different sample "
                f"layout than {first.source} ({fields}). {hint}".strip()
            )
    return DatasetIndex([c for part in filled for c in part.chunks], first.config, str(time.time()), source)


def complete_dataset(directory: str | os.PathLike[str]) -> DatasetIndex:
    """Merge a directory's ``{rank}.index.json`` files into ``index.json`` and remove them.

    Idempotent: a directory that already has ``index.json`` and no rank files is left as is.

    Args:
        directory: the dataset folder the writers wrote into.

    Raises:
        ValueError: a rank's index stores its samples differently from the others.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"Dataset directory does not exist: {directory} (complete_dataset needs the folder the writers wrote into)"
        )
    files = rank_index_files(directory)
    if not files:
        return load_index(directory)
    parts = [load_index(p) for p in files]
    if (directory / INDEX_FILENAME).exists():
        parts.insert(0, load_index(directory))
    merged = merge_indexes(parts, str(directory / INDEX_FILENAME), "Write every rank's samples alike.")
    write_json_atomic(directory / INDEX_FILENAME, merged.to_json())
    for p in files:
        p.unlink(missing_ok=True)
    return merged


def is_complete_dataset(directory: str | os.PathLike[str]) -> bool:
    """True when ``index.json`` exists, no rank index is pending and every chunk file is present.

    Args:
        directory: the dataset folder.
    """
    directory = Path(directory)
    if not (directory / INDEX_FILENAME).is_file() or rank_index_files(directory):
        return False
    try:
        index = load_index(directory)
    except (ValueError, FileNotFoundError):
        return False
    return all((directory / c.filename).is_file() for c in index.chunks)
