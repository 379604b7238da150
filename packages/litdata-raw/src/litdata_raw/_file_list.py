"""A raw dataset's file list held as a few arrays instead of one Python object per file.

Millions of ``FileMetadata`` objects cost memory, and every forked DataLoader worker touching
their reference counts copies their pages. A :class:`FileList` keeps the paths as one UTF-8 blob
(after a prefix common to all of them) with offsets per path, and the sizes as an int64 array:
buffers a forked worker shares untouched. A :class:`FileMetadata` is made when an entry is read.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, overload

import numpy as np

__all__ = ["FileList", "FileListBuilder", "FileMetadata"]

_BLOCK = 8192  # entries buffered as Python objects before they join the arrays (~1 MiB)
_DOT, _SLASH = ord("."), ord("/")
_UNSAFE = re.compile(rb"//|/\.|\x00")  # what may start an empty, "." or ".." part, or a NUL


@dataclass
class FileMetadata:
    """One file of a raw dataset.

    Attributes:
        path: the file's full URL (``s3://bucket/files/a.jpg``) or absolute local path.
        size: its size in bytes.
    """

    path: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        """The index's JSON form."""
        return {"path": self.path, "size": self.size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileMetadata:
        """Read one entry of the index's ``files`` list.

        Args:
            data: the entry, decoded.
        """
        return cls(path=str(data["path"]), size=int(data["size"]))


class FileList(Sequence[FileMetadata]):
    """The files of a raw dataset, in listing order: a read-only sequence of :class:`FileMetadata`.

    Indexing, iteration, ``len``, slicing (another ``FileList`` sharing the same buffers) and
    ``==`` against any sequence of ``FileMetadata`` work as on a list; ``+`` with a sequence gives
    a list. Build one with :class:`FileListBuilder` or :meth:`from_files`.
    """

    __slots__ = ("_blob", "_ends", "_prefix", "_sizes", "_starts")

    def __init__(
        self,
        prefix: str,
        blob: bytes | bytearray,
        starts: array[int],
        ends: array[int],
        sizes: array[int],
    ) -> None:
        self._prefix = prefix
        self._blob = blob
        self._starts = starts
        self._ends = ends
        self._sizes = sizes

    @classmethod
    def from_files(cls, files: Iterable[FileMetadata]) -> FileList:
        """A ``FileList`` of ``files`` (a list a custom indexer returned, say).

        Args:
            files: the files, in the order to keep.
        """
        if isinstance(files, FileList):
            return files
        items = list(files)
        # Characters, not path parts: the prefix is only cut off the stored strings.
        builder = FileListBuilder(os.path.commonprefix([f.path for f in items]) if items else "")  # noqa: RUF071
        for meta in items:
            builder.add(meta.path, meta.size)
        return builder.build()

    def __len__(self) -> int:
        return len(self._sizes)

    @overload
    def __getitem__(self, index: int) -> FileMetadata: ...

    @overload
    def __getitem__(self, index: slice) -> FileList: ...

    def __getitem__(self, index: int | slice) -> FileMetadata | FileList:
        if isinstance(index, slice):
            # The offsets and sizes are copied (a few bytes per file); the blob is shared.
            return FileList(self._prefix, self._blob, self._starts[index], self._ends[index], self._sizes[index])
        count = len(self._sizes)
        position = int(index)
        if position < 0:
            position += count
        if not 0 <= position < count:
            raise IndexError(f"file index {index} is out of range for a list of {count} files")
        return FileMetadata(self.path(position), int(self._sizes[position]))

    @property
    def prefix(self) -> str:
        """The characters every path of the list starts with (stored once)."""
        return self._prefix

    def path(self, position: int) -> str:
        """The path of the file at ``position`` (no ``FileMetadata`` made).

        Args:
            position: the file's place in the list (0 to ``len - 1``).
        """
        key = self._blob[self._starts[position] : self._ends[position]].decode("utf-8")
        return self._prefix + key

    def __iter__(self) -> Iterator[FileMetadata]:
        for paths, sizes in self.blocks():
            yield from map(FileMetadata, paths, sizes)

    def blocks(self, block: int = _BLOCK) -> Iterator[tuple[list[str], list[int]]]:
        """The paths and sizes, ``block`` files at a time (no ``FileMetadata`` made).

        Args:
            block: the most files in one block.
        """
        prefix, blob = self._prefix, self._blob
        for first in range(0, len(self._sizes), block):
            starts = self._starts[first : first + block].tolist()
            ends = self._ends[first : first + block].tolist()
            paths = [prefix + blob[start:end].decode("utf-8") for start, end in zip(starts, ends, strict=True)]
            yield paths, self._sizes[first : first + block].tolist()

    @property
    def sizes(self) -> memoryview:
        """Every file's size in bytes: a read-only view of int64 values (``.tolist()``, numpy's ``asarray``)."""
        return memoryview(self._sizes).toreadonly()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        items: Sequence[Any] = other  # pyright: ignore[reportUnknownVariableType] - compared item by item
        return len(items) == len(self) and all(a == b for a, b in zip(self, items, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable-looking like a list: not hashable

    def __add__(self, other: Sequence[Any]) -> list[Any]:
        return [*self, *other]

    def __radd__(self, other: Sequence[Any]) -> list[Any]:
        return [*other, *self]

    def copy(self) -> list[FileMetadata]:
        """A list of the files (to sort or extend in place, as with a list)."""
        return list(self)

    def __getattr__(self, name: str) -> Any:
        if name in ("append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"):
            raise AttributeError(
                f"a FileList is read-only and has no {name}(): take a list of it first "
                f"(files = list(files), or sorted(files, key=...))"
            )
        raise AttributeError(f"'FileList' object has no attribute {name!r}")

    def __repr__(self) -> str:
        shown = ", ".join(repr(meta) for meta in self[:3])
        more = f", ... ({len(self)} files)" if len(self) > 3 else ""
        return f"FileList([{shown}{more}])"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FileList, (self._prefix, self._blob, self._starts, self._ends, self._sizes))

    def suspects(self, base: str) -> list[int] | None:
        """The positions of the paths that may not be ``base`` and a relative path inside it.

        Found on the buffers at C speed: a path is beyond suspicion when it starts with ``base``
        and what follows has no NUL, no ``//`` or ``/.``, and neither starts with ``.`` or ``/``
        nor ends with ``/`` (so no empty, ``.`` or ``..`` part). The others (hidden files such as
        ``a/.keep`` among them) are for the caller to look at one by one. None when the prefix all
        paths share does not pass: then every path is for the caller.

        Args:
            base: the dataset's root and its separator (``s3://bucket/raw/``).
        """
        if not self._prefix.startswith(base):
            return None
        head = self._prefix[len(base) :].encode("utf-8")
        if _UNSAFE.search(head) or head[:1] in (b".", b"/"):
            return None
        count = len(self._sizes)
        data = np.frombuffer(self._blob, dtype=np.uint8)
        if not count or not len(data):
            return list(range(count))  # no bytes after the prefix: a path or none, looked at whole
        starts = np.asarray(memoryview(self._starts), dtype=np.int64)
        ends = np.asarray(memoryview(self._ends), dtype=np.int64)
        first, last = data[np.minimum(starts, len(data) - 1)], data[np.maximum(ends - 1, 0)]
        odd = (ends <= starts) | (first == _DOT) | (first == _SLASH) | (last == _SLASH)
        blob = self._blob
        if b"//" in blob or b"/." in blob or b"\x00" in blob:  # rare (hidden files): then where
            found = [match.start() for match in _UNSAFE.finditer(blob)]
            odd[np.searchsorted(ends, np.asarray(found, dtype=np.int64), side="right")] = True
        return np.flatnonzero(odd).tolist()

    def nbytes(self) -> int:
        """The bytes the list's buffers take (the blob and the three arrays)."""
        arrays = (self._starts, self._ends, self._sizes)
        return len(self._blob) + sum(len(a) * a.itemsize for a in arrays)


class FileListBuilder:
    """Collects files one by one into a :class:`FileList`, holding at most a block of them as objects.

    ``prefix``: what every path is expected to start with, stored once (a path without it shortens it).
    """

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._blob = bytearray()
        self._lengths = array("q")
        self._all_sizes = array("q")
        self._keys: list[bytes] = []
        self._sizes: list[int] = []

    def __len__(self) -> int:
        return len(self._all_sizes) + len(self._sizes)

    def add(self, path: str, size: int) -> None:
        """Append one file: its full path or URL, and its size in bytes."""
        if not path.startswith(self._prefix):
            self._shorten_prefix(path)
        self._keys.append(path[len(self._prefix) :].encode("utf-8"))
        self._sizes.append(size)
        if len(self._sizes) >= _BLOCK:
            self._flush()

    def _flush(self) -> None:
        if not self._sizes:
            return
        self._blob += b"".join(self._keys)
        self._lengths.extend(map(len, self._keys))
        self._all_sizes.extend(self._sizes)
        self._keys, self._sizes = [], []

    def _shorten_prefix(self, path: str) -> None:
        """Keep working when a path lacks the prefix: shorten it, and prepend the cut part to what is stored."""
        self._flush()
        shorter = os.path.commonprefix([self._prefix, path])  # noqa: RUF071 - characters, not path parts
        cut = self._prefix[len(shorter) :].encode("utf-8")
        self._prefix = shorter
        if not self._lengths:
            return
        old, end = bytes(self._blob), 0
        pieces: list[bytes] = []
        for length in self._lengths:
            pieces.append(cut + old[end : end + length])
            end += length
        self._blob = bytearray(b"".join(pieces))
        self._lengths = array("q", (length + len(cut) for length in self._lengths))

    def build(self) -> FileList:
        """The list of every file added, in order."""
        self._flush()
        # Offsets of 4 bytes below 4 GiB of paths: 8 bytes per file instead of 16.
        code = "I" if len(self._blob) < 2**32 and array("I").itemsize == 4 else "q"
        ends = array(code, accumulate(self._lengths))
        starts = array(code, [0])
        starts.extend(ends[:-1])
        if not ends:
            starts = array(code)
        blob, self._blob = self._blob, bytearray()  # kept as is: a bytes copy would double it for a moment
        sizes, self._all_sizes, self._lengths = self._all_sizes, array("q"), array("q")
        return FileList(self._prefix, blob, starts, ends, sizes)
