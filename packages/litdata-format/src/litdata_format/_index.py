"""``index.json``: reading, validating, writing atomically, and merging per-rank index files.

A dataset directory holds chunk files and one ``index.json`` (``{"chunks", "config",
"updated_at"}``). Each writer first writes ``{rank}.index.json``; the merge concatenates their
chunks in natural file-name order, checks their configs agree and publishes ``index.json`` by
writing a temporary file and renaming it, so a reader never sees half an index.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litdata_format._atomic import write_file_atomic

__all__ = [
    "INDEX_FILENAME",
    "IndexNotFoundError",
    "ChunkInfo",
    "DatasetIndex",
    "complete_dataset",
    "is_complete_dataset",
    "load_index",
    "parse_index",
    "write_json_atomic",
]

INDEX_FILENAME = "index.json"
_RANK_INDEX = re.compile(r"^(\d+)\.index\.json$")


def _natural_key(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def check_chunk_filename(name: Any, source: str) -> str:
    """``name`` if it is a path inside the dataset folder: a file name, or ``/``-separated
    folders and a file name (upstream's Hugging Face Parquet indexes list ``train/0000.parquet``).
    Chunk names must never point outside the dataset, nor at hidden files (the cache's own)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{source}: a chunk's filename must be a non-empty string, got {name!r}")
    parts = name.split("/")
    if "\\" in name or "\x00" in name or any(not part or part.startswith(".") for part in parts):
        raise ValueError(
            f"{source}: chunk filename {name!r} is not a relative path inside the dataset (no '..', no leading "
            "'/', no hidden or empty parts, no '\\'); refusing to use it"
        )
    return name


class IndexNotFoundError(FileNotFoundError, ValueError):
    """A dataset folder has no ``index.json``.

    A ``ValueError`` as upstream LitData raises for a folder without one, and a
    ``FileNotFoundError`` for what it is.
    """


@dataclass(frozen=True)
class ChunkInfo:
    """One entry of ``chunks`` in ``index.json``.

    Attributes:
        filename: the chunk's file name inside the dataset directory.
        chunk_bytes: its size in bytes before any whole-file compression.
        chunk_size: how many items it holds.
        dim: the token count (TokensLoader datasets), else None.
        extra: any other keys of the entry (e.g. MDS ``column_sizes``), kept as they are.
    """

    filename: str
    chunk_bytes: int
    chunk_size: int
    dim: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "chunk_bytes": self.chunk_bytes,
            "chunk_size": self.chunk_size,
            "dim": self.dim,
            "filename": self.filename,
            **self.extra,
        }


def _int_field(entry: Mapping[str, Any], key: str, source: str, optional: bool = False) -> Any:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{source}: chunk entry {entry.get('filename')!r} has an invalid {key!r}: {value!r}")
    return value


@dataclass
class DatasetIndex:
    """A parsed ``index.json``: its chunks and its config (kept as the raw dict).

    Attributes:
        chunks: the chunk entries, in order; item numbering runs through them in this order.
        config: the ``config`` object as written (``data_format``, ``data_spec``, ...).
        updated_at: the writer's timestamp string, if any.
        source: where it was read from, for error messages.
    """

    chunks: list[ChunkInfo]
    config: dict[str, Any]
    updated_at: str | None = None
    source: str = INDEX_FILENAME

    @property
    def compression(self) -> str | None:
        return self.config.get("compression")

    @property
    def encryption(self) -> dict[str, Any] | None:
        return self.config.get("encryption")

    @property
    def item_loader(self) -> str:
        return self.config.get("item_loader") or "PyTreeLoader"

    @property
    def data_format(self) -> list[str]:
        return list(self.config.get("data_format") or [])

    @property
    def num_items(self) -> int:
        return sum(chunk.chunk_size for chunk in self.chunks)

    def to_json(self) -> dict[str, Any]:
        return {
            "chunks": [chunk.to_json() for chunk in self.chunks],
            "config": self.config,
            "updated_at": self.updated_at if self.updated_at is not None else str(time.time()),
        }


def parse_index(obj: Any, source: str = INDEX_FILENAME) -> DatasetIndex:
    """Validate a decoded ``index.json`` (LitData or MosaicML MDS) and return its contents."""
    if not isinstance(obj, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(obj).__name__}")
    if "shards" in obj and "chunks" not in obj:
        from litdata_format._mds import parse_mds_index

        return parse_mds_index(obj, source)
    chunks, config = obj.get("chunks"), obj.get("config")
    if chunks == [] and "config" in obj and config is None:
        config = {"data_format": [], "data_spec": None}  # an empty dataset, as upstream's optimize writes it
    if not isinstance(chunks, list) or not isinstance(config, dict):
        raise ValueError(f"{source}: an index needs a 'chunks' list and a 'config' object (keys: {sorted(obj)})")
    infos = []
    for entry in chunks:
        if not isinstance(entry, dict):
            raise ValueError(f"{source}: each chunk entry must be an object, got {entry!r:.100}")
        known = {"filename", "chunk_bytes", "chunk_size", "dim"}
        infos.append(
            ChunkInfo(
                filename=check_chunk_filename(entry.get("filename"), source),
                chunk_bytes=_int_field(entry, "chunk_bytes", source),
                chunk_size=_int_field(entry, "chunk_size", source),
                dim=_int_field(entry, "dim", source, optional=True),
                extra={k: v for k, v in entry.items() if k not in known},
            )
        )
    for key in ("data_format", "data_spec"):
        if key not in config:
            raise ValueError(f"{source}: config is missing {key!r}")
    if not isinstance(config["data_format"], list):
        raise ValueError(f"{source}: config.data_format must be a list of serializer names")
    updated = obj.get("updated_at")
    return DatasetIndex(infos, config, None if updated is None else str(updated), source)


def load_index(path: str | os.PathLike[str]) -> DatasetIndex:
    """Read ``index.json`` from a dataset directory (or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / INDEX_FILENAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        hint = ""
        if path.parent.is_dir() and any(_RANK_INDEX.match(p.name) for p in path.parent.iterdir()):
            hint = " It has per-rank index files: finish it with litdata_format.complete_dataset(dir)."
        raise IndexNotFoundError(f"{path}: no index.json here; is this an optimized dataset?{hint}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: index.json is not valid JSON ({err}); it may be truncated") from None
    return parse_index(obj, str(path))


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and a rename."""
    write_file_atomic(path, json.dumps(obj, sort_keys=True).encode())


def rank_index_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``{rank}.index.json`` files of a dataset directory, in rank order."""
    found = [p for p in Path(directory).iterdir() if _RANK_INDEX.match(p.name)]
    return sorted(found, key=lambda p: int(p.name.split(".", 1)[0]))


def merge_indexes(parts: list[DatasetIndex], source: str) -> DatasetIndex:
    """One index holding the chunks of ``parts`` in natural file-name order; configs must agree."""
    if not parts:
        raise ValueError(f"{source}: nothing to merge")
    config = parts[0].config
    for part in parts[1:]:
        if part.config != config:
            diff = sorted(k for k in set(config) | set(part.config) if config.get(k) != part.config.get(k))
            raise ValueError(f"{source}: {part.source} was written with a different config (fields: {diff})")
    chunks = sorted((c for p in parts for c in p.chunks), key=lambda c: _natural_key(c.filename))
    return DatasetIndex(chunks, config, str(time.time()), source)


def complete_dataset(directory: str | os.PathLike[str]) -> DatasetIndex:
    """Merge a directory's ``{rank}.index.json`` files into ``index.json`` and remove them.

    Idempotent: a directory that already has ``index.json`` and no rank files is left as is.
    """
    directory = Path(directory)
    files = rank_index_files(directory)
    if not files:
        return load_index(directory)
    parts = [load_index(p) for p in files]
    if (directory / INDEX_FILENAME).exists():
        parts.insert(0, load_index(directory))
    merged = merge_indexes(parts, str(directory / INDEX_FILENAME))
    write_json_atomic(directory / INDEX_FILENAME, merged.to_json())
    for p in files:
        p.unlink(missing_ok=True)
    return merged


def is_complete_dataset(directory: str | os.PathLike[str]) -> bool:
    """True when ``index.json`` exists, no rank index is pending and every chunk file is present."""
    directory = Path(directory)
    if not (directory / INDEX_FILENAME).is_file() or rank_index_files(directory):
        return False
    try:
        index = load_index(directory)
    except (ValueError, FileNotFoundError):
        return False
    return all((directory / c.filename).is_file() for c in index.chunks)
