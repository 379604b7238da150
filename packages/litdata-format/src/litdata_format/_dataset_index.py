"""The parsed ``index.json``: its chunk entries and config, and the checks of single fields.

The bottom of the index: :mod:`litdata_format._index` (LitData) and :mod:`litdata_format._mds`
(MosaicML) both parse into these types.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from litdata_format._guards import is_str_dict

if TYPE_CHECKING:
    from litdata_format._chunk_table import ChunkTable

__all__ = ["INDEX_FILENAME", "ChunkInfo", "DatasetIndex", "check_chunk_filename", "int_field"]

INDEX_FILENAME = "index.json"


def check_chunk_filename(name: Any, source: str) -> str:
    """``name`` if it is a path inside the dataset folder.

    A file name, or ``/``-separated folders and a file name (upstream's Hugging Face Parquet
    indexes list ``train/0000.parquet``). Chunk names must never point outside the dataset, nor at
    hidden files (the cache's own).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{source}: a chunk's filename must be a non-empty string, got {name!r}")
    parts = name.split("/")
    if "\\" in name or "\x00" in name or any(not part or part.startswith(".") for part in parts):
        raise ValueError(
            f"{source}: chunk filename {name!r} is not a relative path inside the dataset (no '..', no leading "
            "'/', no hidden or empty parts, no '\\'); refusing to use it"
        )
    return name


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
    extra: Mapping[str, Any] = field(default_factory=dict[str, Any])

    @classmethod
    def from_json(cls, entry: Any, where: str) -> ChunkInfo:
        """The entry ``entry`` of an index's ``chunks``, checked; ``where`` names it in errors.

        Args:
            entry: the decoded JSON entry.
            where: names the entry in error messages.
        """
        if not is_str_dict(entry):
            raise ValueError(f"{where} must be an object, got {entry!r:.100}")
        known = {"filename", "chunk_bytes", "chunk_size", "dim"}
        return cls(
            filename=check_chunk_filename(entry.get("filename"), where),
            chunk_bytes=int_field(entry, "chunk_bytes", where),
            chunk_size=int_field(entry, "chunk_size", where),
            dim=int_field(entry, "dim", where, optional=True),
            extra={k: v for k, v in entry.items() if k not in known},
        )

    def to_json(self) -> dict[str, Any]:
        """The entry as ``index.json`` holds it, its unknown keys included."""
        return {
            "chunk_bytes": self.chunk_bytes,
            "chunk_size": self.chunk_size,
            "dim": self.dim,
            "filename": self.filename,
            **self.extra,
        }


# Far above any real chunk (256 TiB, 2**48 items or tokens), far below what overflows an int64
# when the reader sums them over chunks.
_MAX_COUNT = 1 << 48


def int_field(entry: Mapping[str, Any], key: str, where: str, optional: bool = False) -> Any:
    """``entry[key]``, checked to be a count (an int from 0 to 2**48); None when ``optional`` and null."""
    value = entry.get(key)
    if value is None and optional:
        return None
    if key not in entry:
        raise ValueError(f"{where}: {key!r} is missing")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _MAX_COUNT:
        raise ValueError(f"{where}: {key!r} must be an integer from 0 to 2**48, got {value!r:.100}")
    return value


# Readers count items, tokens and bytes across chunks as int64 (and ``len()`` is bounded by it).
_MAX_TOTAL = (1 << 63) - 1


def _check_totals(chunks: ChunkTable, source: str) -> None:
    """Refuse an index whose chunks' items, tokens or bytes add up past what an int64 holds.

    Each field is bounded per chunk (:func:`int_field`), but 2**15 chunks at that bound still
    overflow the readers' sums; the error names the field and the chunk where the sum passes it.
    """
    columns = (("chunk_size", chunks.chunk_sizes), ("dim", chunks.dims), ("chunk_bytes", chunks.chunk_bytes))
    for field_name, values in columns:
        column = np.maximum(values, 0)  # a null dim is -1
        if not column.size or int(column.max()) * len(column) <= _MAX_TOTAL:
            continue  # cannot overflow: no exact sum needed
        total = 0
        for number, value in enumerate(column.tolist()):  # where it passes, for the message
            total += value
            if total > _MAX_TOTAL:
                raise ValueError(
                    f"{source}: the chunks' {field_name!r} values add up past 2**63 - 1 at chunks[{number}] "
                    f"({chunks.filename(number)}); no dataset is that large, so the index is damaged or hostile: "
                    "rewrite it"
                )


@dataclass
class DatasetIndex:
    """A parsed ``index.json``: its chunks and its config (kept as the raw dict).

    Attributes:
        chunks: the chunk entries, in order; item numbering runs through them in this order.
            Given as any sequence of ``ChunkInfo``, kept as a ``ChunkTable`` (columns: its
            ``chunk_sizes``, ``chunk_bytes``, ``dims`` arrays and ``filename(i)``).
        config: the ``config`` object as written (``data_format``, ``data_spec``, ...).
        updated_at: the writer's timestamp string, if any.
        source: where it was read from, for error messages.
    """

    chunks: Sequence[ChunkInfo]
    config: dict[str, Any]
    updated_at: str | None = None
    source: str = INDEX_FILENAME

    def __post_init__(self) -> None:
        from litdata_format._chunk_table import ChunkTable

        if not isinstance(self.chunks, ChunkTable):
            self.chunks = ChunkTable.from_infos(self.chunks)
        _check_totals(self.table, self.source)

    @property
    def table(self) -> ChunkTable:
        """The chunks as columns (sizes as arrays, file names without building entries)."""
        from litdata_format._chunk_table import ChunkTable

        chunks = self.chunks
        if not isinstance(chunks, ChunkTable):  # chunks reassigned after construction
            chunks = self.chunks = ChunkTable.from_infos(chunks)
        return chunks

    @property
    def compression(self) -> str | None:
        """The compression the config names (e.g. ``"zstd"``), or None."""
        return self.config.get("compression")

    @property
    def encryption(self) -> dict[str, Any] | None:
        """The encryption settings the dataset was written with (no key), or None."""
        return self.config.get("encryption")

    @property
    def item_loader(self) -> str:
        """The class name of the item loader that reads the chunks (``PyTreeLoader`` when unnamed)."""
        return self.config.get("item_loader") or "PyTreeLoader"

    @property
    def data_format(self) -> list[str]:
        """The serializer name of each leaf, in leaf order."""
        return list(self.config.get("data_format") or [])

    @property
    def num_items(self) -> int:
        """How many items the chunks hold together."""
        return int(self.table.chunk_sizes.sum())

    def to_json(self) -> dict[str, Any]:
        """The index as ``index.json`` holds it (``updated_at`` is now when it was never set)."""
        empty = not self.chunks and self.config.get("data_spec") is None
        return {
            "chunks": [chunk.to_json() for chunk in self.chunks],
            "config": None if empty else self.config,  # a dataset without a sample, as upstream writes it
            "updated_at": self.updated_at if self.updated_at is not None else str(time.time()),
        }
