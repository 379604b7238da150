"""The chunks of an index as columns: what ``DatasetIndex.chunks`` holds.

An index of a million chunks parsed into a ``ChunkInfo`` (and a dict of extra keys) per chunk
costs hundreds of bytes per chunk and seconds of Python; a reader needs only the columns. So the
entries are checked column by column and kept as numpy arrays (sizes) and joined strings with
offsets (file names, checksums): under 100 bytes per chunk. The table is still a sequence of
``ChunkInfo``: ``table[i]`` builds the entry on demand, so code that walks entries keeps working.
An index whose entries do not all have one shape is checked entry by entry (for the message
naming the bad one) and stored the same way.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

from litdata_format._dataset_index import ChunkInfo

__all__ = ["ChunkTable"]

_KNOWN = ("chunk_bytes", "chunk_size", "dim", "filename")
_MAX_COUNT = 1 << 48
# check_chunk_filename's rule as one pattern: '/'-separated non-empty parts, none starting with
# '.', no backslash or NUL.
_SAFE_NAME = re.compile(r"(?:[^./\\\x00][^/\\\x00]*/)*[^./\\\x00][^/\\\x00]*")
_MISSING: Any = object()


class _Strings:
    """Strings as one joined string and the offsets between them (a list of 1M names is ~70 MB)."""

    __slots__ = ("_joined", "_offsets")

    def __init__(self, values: Sequence[str]) -> None:
        self._joined = "".join(values)
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)), out=offsets[1:])
        self._offsets = offsets

    def __getitem__(self, number: int) -> str:
        return self._joined[int(self._offsets[number]) : int(self._offsets[number + 1])]

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def to_list(self) -> list[str]:
        ends = self._offsets.tolist()
        joined = self._joined
        return [joined[a:b] for a, b in itertools.pairwise(ends)]

    def __getstate__(self) -> tuple[str, np.ndarray]:
        return self._joined, self._offsets

    def __setstate__(self, state: tuple[str, np.ndarray]) -> None:
        self._joined, self._offsets = state


def _column(values: list[Any]) -> _Strings | list[Any]:
    return _Strings(values) if set(map(type, values)) <= {str} else values


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

    def __init__(self, names: Sequence[str], chunk_bytes: np.ndarray, chunk_sizes: np.ndarray, dims: np.ndarray,
                 extras: dict[str, list[Any]] | None = None) -> None:  # fmt: skip
        self._names = names if isinstance(names, _Strings) else _Strings(names)
        self.chunk_bytes = chunk_bytes
        self.chunk_sizes = chunk_sizes
        self.dims = dims
        # Extra keys by name: a value per chunk (_MISSING where the entry lacks the key).
        self._extras: dict[str, _Strings | list[Any]] = {k: _column(v) for k, v in (extras or {}).items()}

    @classmethod
    def from_infos(cls, infos: Iterable[ChunkInfo]) -> ChunkTable:
        """The table of ``infos``, in order.

        Args:
            infos: the chunk entries.
        """
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
        fails, entry by entry, so the error names the first bad entry and its field.

        Args:
            entries: what ``json.loads`` made of the ``chunks`` list.
            source: where the index was read from, for error messages.

        Raises:
            ValueError: an entry is not a valid chunk entry (the message names it and the field).
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
        first = entries[0]
        keys = tuple(first)
        if not {"filename", "chunk_bytes", "chunk_size"} <= set(keys):
            return None
        if any(tuple(entry) != keys for entry in entries):  # key order too: one shape for all
            return None
        columns = {key: [entry[key] for entry in entries] for key in keys}
        names = columns.pop("filename")
        if set(map(type, names)) != {str} or not all(map(_SAFE_NAME.fullmatch, names)):
            return None
        sizes = _ints(columns.pop("chunk_size"))
        nbytes = _ints(columns.pop("chunk_bytes"))
        dims = _ints(columns.pop("dim", [None] * len(entries)), optional=True)
        if sizes is None or nbytes is None or dims is None:
            return None
        return cls(names, nbytes, sizes, dims, columns)

    def __len__(self) -> int:
        return len(self.chunk_sizes)

    def filename(self, number: int) -> str:
        """The file name of chunk ``number`` (without building its entry).

        Args:
            number: the chunk's position in the index.
        """
        return self._names[number]

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

    def __hash__(self) -> int:  # a mutable-looking sequence, compared by value: not hashable
        raise TypeError("unhashable type: 'ChunkTable'")

    def __repr__(self) -> str:
        return f"ChunkTable({len(self)} chunks)"
