"""The parsed ``index.json``: its chunk entries and config, and the checks of single fields.

Both LitData's ``index.json`` and MosaicML's parse into these types.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from litdata_format._guards import is_str_dict

__all__ = [
    "INDEX_FILENAME",
    "ChunkInfo",
    "ChunkTable",
    "DatasetIndex",
    "Strings",
    "check_chunk_filename",
    "check_relative_path",
    "int_field",
]

INDEX_FILENAME = "index.json"


# A '/'-separated path that stays inside the folder it is joined to: non-empty parts, none '.'
# or '..', no NUL (a leading '/' is an empty first part).
_INSIDE_PART = r"(?!\.\.?(?:/|\Z))[^/\x00]+"
_INSIDE = re.compile(rf"(?:{_INSIDE_PART}/)*{_INSIDE_PART}")


def check_relative_path(name: Any, source: str, what: str) -> str:
    """``name`` if, joined to a folder, it names something inside that folder.

    The one check of every name a dataset's own files give for other files (chunk filenames, a raw
    dataset's listed keys): they come from a bucket others can write and are joined to local folders.

    Raises:
        ValueError: ``name`` is not a string, is absolute, or has an empty, ``.`` or ``..`` part;
            the message names ``source`` (the file) and ``what`` (``"chunk filename"``, ``"files[3]"``).
    """
    if not isinstance(name, str) or not _INSIDE.fullmatch(name):
        raise ValueError(
            f"{source}: {what} {name!r} is not a relative path inside the dataset (no '..' or '.' parts, no "
            "leading '/', no empty parts); refusing to use it"
        )
    return name


def check_chunk_filename(name: Any, source: str) -> str:
    r"""``name`` if it is a path inside the dataset folder, naming no hidden file and holding no ``\``.

    Folders are allowed: upstream's Hugging Face Parquet indexes list ``train/0000.parquet``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{source}: a chunk's filename must be a non-empty string, got {name!r}")
    check_relative_path(name, source, "chunk filename")
    if "\\" in name or any(part.startswith(".") for part in name.split("/")):
        raise ValueError(
            f"{source}: chunk filename {name!r} is not a relative path inside the dataset: it names a hidden "
            "file (the cache's own names start with '.') or holds a '\\'; refusing to use it"
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


# -- the chunks as columns ----------------------------------------------------------------------
# A ``ChunkInfo`` per chunk costs hundreds of bytes and seconds of Python at a million chunks, so
# the entries are checked and kept as columns (numpy sizes, joined strings); ``table[i]`` builds
# the entry on demand.

# check_chunk_filename's rule as one pattern: '/'-separated non-empty parts, none starting with
# '.', no backslash or NUL.
_SAFE_NAME = re.compile(r"(?:[^./\\\x00][^/\\\x00]*/)*[^./\\\x00][^/\\\x00]*")
_MISSING: Any = object()


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """The offsets of strings of ``lengths``: 0 and their running sums, as int32 when they fit."""
    total = int(lengths.sum(dtype=np.int64))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32 if total < 2**31 else np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


class Strings:
    """Strings as one joined string and the offsets between them (a list of 1M names is ~70 MB)."""

    __slots__ = ("_joined", "_offsets")

    def __init__(self, values: Sequence[str]) -> None:
        self._joined = "".join(values)
        self._offsets = _offsets(np.fromiter(map(len, values), dtype=np.int64, count=len(values)))

    @classmethod
    def from_joined(cls, joined: str, lengths: np.ndarray) -> Strings:
        """The strings of ``joined`` cut at ``lengths`` (characters, adding up to its length), without a str each."""
        if int(lengths.sum()) != len(joined):
            raise ValueError(
                f"the lengths add up to {int(lengths.sum())} characters, the joined string has {len(joined)}"
            )
        found = cls.__new__(cls)
        found._joined, found._offsets = joined, _offsets(lengths)
        return found

    @property
    def joined(self) -> str:
        """The strings back to back."""
        return self._joined

    @property
    def offsets(self) -> np.ndarray:
        """Where each string starts in :attr:`joined`, and where the last ends (one more than the strings).

        int32 while the strings add up to less than 2**31 characters (4 bytes per string), else int64.
        """
        return self._offsets

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Strings):
            return NotImplemented
        return self._joined == other._joined and np.array_equal(self._offsets, other._offsets)  # any int dtype

    __hash__ = None  # type: ignore[assignment]

    def __getitem__(self, number: int) -> str:
        return self._joined[int(self._offsets[number]) : int(self._offsets[number + 1])]

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def to_list(self) -> list[str]:
        ends = self._offsets.tolist()
        joined = self._joined
        return [joined[a:b] for a, b in itertools.pairwise(ends)]


def _column(values: Strings | list[Any]) -> Strings | list[Any]:
    if isinstance(values, Strings):
        return values
    return Strings(values) if set(map(type, values)) <= {str} else values


def _ints(values: list[Any], optional: bool = False) -> np.ndarray | None:
    """``values`` as int64 when each is a count (an int from 0 to 2**48; None too when ``optional``, as -1)."""
    kinds = set(map(type, values))
    if optional and type(None) in kinds:
        kinds.discard(type(None))
        values = [-1 if v is None else v for v in values]
    if not kinds <= {int}:
        return None
    try:
        found = np.array(values, dtype=np.int64) if values else np.empty(0, dtype=np.int64)
    except OverflowError:
        return None  # past int64: the entry-by-entry check names it
    low = -1 if optional else 0
    if found.size and (found.min() < low or found.max() > _MAX_COUNT):
        return None
    return found


class ChunkTable(Sequence[ChunkInfo]):
    """The chunk entries of an index, in order, stored as columns.

    Attributes:
        chunk_sizes: each chunk's ``chunk_size`` (items, or tokens), int64.
        chunk_bytes: each chunk's ``chunk_bytes``, int64.
        dims: each chunk's ``dim``, int64, -1 where it is null.
    """

    def __init__(self, names: Sequence[str] | Strings, chunk_bytes: np.ndarray, chunk_sizes: np.ndarray,
                 dims: np.ndarray, extras: Mapping[str, Strings | list[Any]] | None = None) -> None:  # fmt: skip
        self._names = names if isinstance(names, Strings) else Strings(names)
        self.chunk_bytes = chunk_bytes
        self.chunk_sizes = chunk_sizes
        self.dims = dims
        # Extra keys by name: a value per chunk (_MISSING where the entry lacks the key).
        self._extras: dict[str, Strings | list[Any]] = {k: _column(v) for k, v in (extras or {}).items()}

    @classmethod
    def from_infos(cls, infos: Iterable[ChunkInfo]) -> ChunkTable:
        """The table of ``infos``, in order."""
        infos = list(infos)
        keys = sorted({k for info in infos for k in info.extra})
        return cls(
            [info.filename for info in infos],
            np.array([info.chunk_bytes for info in infos], dtype=np.int64),
            np.array([info.chunk_size for info in infos], dtype=np.int64),
            np.array([-1 if info.dim is None else info.dim for info in infos], dtype=np.int64),
            {k: [info.extra.get(k, _MISSING) for info in infos] for k in keys},
        )

    @classmethod
    def parse(cls, entries: list[Any], source: str) -> ChunkTable:
        """The checked table of an index's decoded ``chunks`` list.

        Entries sharing one set of keys are checked column by column; otherwise, or when a column
        fails, entry by entry, so the error (a ValueError naming ``source``) names the first bad
        entry and its field.
        """
        table = cls._parse_columns(entries)
        if table is not None:
            return table
        return cls.from_infos(
            ChunkInfo.from_json(entry, f"{source}: chunks[{number}]") for number, entry in enumerate(entries)
        )

    @classmethod
    def _parse_columns(cls, entries: list[Any]) -> ChunkTable | None:
        if not entries:
            empty = np.empty(0, dtype=np.int64)
            return cls([], empty, empty, empty)
        if set(map(type, entries)) != {dict}:
            return None
        keys = tuple(entries[0])
        if any(tuple(entry) != keys for entry in entries):
            # Entries of other writers (hand-edited, converters): keys in another order, or some
            # without an optional key. Every key any entry has, in the order they first appear.
            keys = tuple(dict.fromkeys(itertools.chain.from_iterable(entries)))
        if not {"filename", "chunk_bytes", "chunk_size"} <= set(keys):
            return None
        # _MISSING where an entry lacks a key: refused below for the required ones (the entry-by-entry
        # check names the entry), None for dim, kept as absent for the others.
        columns = {key: [entry.get(key, _MISSING) for entry in entries] for key in keys}
        names = columns.pop("filename")
        if set(map(type, names)) != {str} or not all(map(_SAFE_NAME.fullmatch, names)):
            return None
        sizes = _ints(columns.pop("chunk_size"))
        nbytes = _ints(columns.pop("chunk_bytes"))
        dims = _ints([None if v is _MISSING else v for v in columns.pop("dim", [None] * len(entries))], optional=True)
        if sizes is None or nbytes is None or dims is None:
            return None
        return cls(names, nbytes, sizes, dims, columns)

    def __len__(self) -> int:
        return len(self.chunk_sizes)

    def filename(self, number: int) -> str:
        """The file name of chunk ``number`` (without building its entry)."""
        return self._names[number]

    def has_extra(self, key: str) -> bool:
        """Whether any entry has the key ``key`` besides the four every entry has (``checksum``, ...)."""
        return key in self._extras

    @property
    def names(self) -> Strings:
        """Every chunk's file name, as one joined string and offsets."""
        return self._names

    @property
    def extra_columns(self) -> dict[str, Strings | list[Any]]:
        """The other keys' columns by key, in the entries' key order.

        Joined strings when every value is one, else a value per chunk (an object that is not a
        JSON value where an entry lacks the key).
        """
        return dict(self._extras)

    @property
    def filenames(self) -> list[str]:
        """Every chunk's file name, in order."""
        return self._names.to_list()

    def _info(self, number: int) -> ChunkInfo:
        dim = int(self.dims[number])
        extra: dict[str, Any] = {}
        for key, column in self._extras.items():
            value = column[number]
            if value is not _MISSING:
                extra[key] = value
        return ChunkInfo(
            self._names[number], int(self.chunk_bytes[number]), int(self.chunk_sizes[number]), None if dim < 0 else dim,
            extra,
        )  # fmt: skip

    @overload
    def __getitem__(self, number: int) -> ChunkInfo: ...

    @overload
    def __getitem__(self, number: slice) -> list[ChunkInfo]: ...

    def __getitem__(self, number: int | slice) -> ChunkInfo | list[ChunkInfo]:
        if isinstance(number, slice):
            return [self._info(i) for i in range(*number.indices(len(self)))]
        count = len(self)
        if number < 0:
            number += count
        if not 0 <= number < count:
            raise IndexError(f"chunk {number} is out of range: the index lists {count} chunks")
        return self._info(number)

    def __iter__(self) -> Iterator[ChunkInfo]:
        return (self._info(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        items: Sequence[Any] = other  # pyright: ignore[reportUnknownVariableType]
        return len(self) == len(items) and all(a == b for a, b in zip(self, items))

    def __add__(self, other: Sequence[ChunkInfo]) -> list[ChunkInfo]:
        """The entries of both, as a list (``a.chunks + b.chunks``)."""
        return [*self, *other]

    def __radd__(self, other: Sequence[ChunkInfo]) -> list[ChunkInfo]:
        return [*other, *self]

    def fingerprint(self) -> str:
        """A short digest of the chunk list: tells a state dict recorded on another dataset.

        The first 16 hex digits of the SHA-1 of ``"{filename}:{chunk_size}:{chunk_bytes};"`` per
        chunk (state dicts hold it: it must never change), built from the columns in blocks.
        """
        digest = hashlib.sha1()
        names = self._names
        # Offsets count characters and the digest hashes UTF-8 bytes; a negative count (a table
        # built by hand: parsing refuses one) has a sign the digit columns cannot show.
        if not names.joined.isascii() or _has_negative(self.chunk_sizes) or _has_negative(self.chunk_bytes):
            rows = zip(self.filenames, self.chunk_sizes.tolist(), self.chunk_bytes.tolist())
            digest.update("".join(f"{name}:{size}:{count};" for name, size, count in rows).encode())
            return digest.hexdigest()[:16]
        for start in range(0, len(self), _FINGERPRINT_BLOCK):
            stop = min(start + _FINGERPRINT_BLOCK, len(self))
            digest.update(_fingerprint_block(names, self.chunk_sizes[start:stop], self.chunk_bytes[start:stop], start))
        return digest.hexdigest()[:16]

    def __hash__(self) -> int:  # a mutable-looking sequence, compared by value: not hashable
        raise TypeError("unhashable type: 'ChunkTable'")

    def __repr__(self) -> str:
        return f"ChunkTable({len(self)} chunks)"


# -- the fingerprint: "{name}:{size}:{bytes};" per chunk, formatted with numpy ------------------
_FINGERPRINT_BLOCK = 1 << 13  # rows: ~1 MiB of temporaries a block
_POWERS = 10 ** np.arange(18, -1, -1, dtype=np.int64)  # an int64 count has at most 19 digits


def _has_negative(values: np.ndarray) -> bool:
    return bool(len(values)) and int(values.min()) < 0


def _decimal(values: np.ndarray) -> np.ndarray:
    """Each of ``values`` (counts, >= 0) as its decimal digits in ASCII, right-aligned after NUL bytes."""
    out = np.zeros((len(values), len(_POWERS)), dtype=np.uint8)
    if not len(values):
        return out
    used = len(str(int(values.max())))  # columns the largest needs: the others stay NUL
    digits = (values[:, None] // _POWERS[-used:]) % 10
    shown = np.cumsum(digits, axis=1) > 0  # from the first digit that is not 0 on
    shown[:, -1] = True  # 0 is "0"
    out[:, -used:] = np.where(shown, digits + 48, 0)
    return out


def _fingerprint_block(names: Strings, sizes: np.ndarray, nbytes: np.ndarray, start: int) -> bytes:
    """``"{name}:{size}:{bytes};"`` of chunks ``start``, ... as ASCII bytes, for ``len(sizes)`` chunks.

    Each chunk is a row of fixed-width fields padded with NUL bytes (no name holds one, and a
    number's decimal digits never do), dropped at the end.
    """
    count = len(sizes)
    offsets = names.offsets[start : start + count + 1]
    text = np.frombuffer(names.joined[int(offsets[0]) : int(offsets[-1])].encode("ascii"), dtype=np.uint8)
    lengths = np.diff(offsets)
    width = int(lengths.max()) if count else 0
    digits = len(_POWERS)
    row = width + 2 * digits + 3
    rows = np.zeros((count, row), dtype=np.uint8)
    starts = offsets[:-1] - offsets[0]
    where = np.repeat(np.arange(count, dtype=np.int64) * row - starts, lengths) + np.arange(len(text), dtype=np.int64)
    rows.reshape(-1)[where] = text
    rows[:, width] = rows[:, width + digits + 1] = ord(":")
    rows[:, width + 1 : width + 1 + digits] = _decimal(sizes)
    rows[:, width + digits + 2 : width + 2 * digits + 2] = _decimal(nbytes)
    rows[:, -1] = ord(";")
    return rows[rows != 0].tobytes()


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
        if not isinstance(self.chunks, ChunkTable):
            self.chunks = ChunkTable.from_infos(self.chunks)
        _check_totals(self.table, self.source)

    @property
    def table(self) -> ChunkTable:
        """The chunks as columns (sizes as arrays, file names without building entries)."""
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
