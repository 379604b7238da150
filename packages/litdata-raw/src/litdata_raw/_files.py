"""A raw dataset's file list held as a few arrays instead of one Python object per file.

A listing of millions of small files as ``FileMetadata`` objects costs ~200 bytes per file in
object headers and dicts, and every DataLoader worker forked from the process touches their
reference counts as it reads them, which copies the pages they live on into each worker. A
:class:`FileList` keeps the paths as one UTF-8 blob (after a prefix common to all of them, the
dataset's root) with an offset per path, and the sizes as an int64 array: three buffers that a
forked worker shares with its parent untouched, ~(path length + 16) bytes per file. A
:class:`FileMetadata` is made when an entry is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

__all__ = ["FileList", "FileListBuilder", "FileMetadata"]

_BLOCK = 65536  # entries buffered as Python objects before they join the arrays


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
        blob: bytes,
        starts: np.ndarray[Any, Any],
        ends: np.ndarray[Any, Any],
        sizes: np.ndarray[Any, Any],
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
            return FileList(self._prefix, self._blob, self._starts[index], self._ends[index], self._sizes[index])
        count = len(self._sizes)
        position = int(index)
        if position < 0:
            position += count
        if not 0 <= position < count:
            raise IndexError(f"file index {index} is out of range for a list of {count} files")
        return FileMetadata(self.path(position), int(self._sizes[position]))

    def path(self, position: int) -> str:
        """The path of the file at ``position`` (no ``FileMetadata`` made)."""
        key = self._blob[int(self._starts[position]) : int(self._ends[position])].decode("utf-8")
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
        # Plain ints in blocks: numpy scalars cost ~100 ns each to convert one by one.
        for first in range(0, len(self._sizes), block):
            starts = self._starts[first : first + block].tolist()
            ends = self._ends[first : first + block].tolist()
            paths = [prefix + blob[start:end].decode("utf-8") for start, end in zip(starts, ends, strict=True)]
            yield paths, self._sizes[first : first + block].tolist()

    @property
    def sizes(self) -> np.ndarray[Any, Any]:
        """Every file's size in bytes, as an int64 array (read-only)."""
        view = self._sizes.view()
        view.flags.writeable = False
        return view

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
        # A slice's arrays are views of the whole list's: pickle only what they cover.
        return (FileList, (self._prefix, self._blob, self._starts.copy(), self._ends.copy(), self._sizes.copy()))

    def nbytes(self) -> int:
        """The bytes the list's buffers take (the blob and the three arrays)."""
        return len(self._blob) + self._starts.nbytes + self._ends.nbytes + self._sizes.nbytes


class FileListBuilder:
    """Collects files one by one into a :class:`FileList`, holding at most a block of them as objects.

    Args:
        prefix: a prefix every path is expected to start with (the dataset's root and its
            separator); stored once. A path without it still works (the prefix is shortened).
    """

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._blob = bytearray()
        self._lengths: list[np.ndarray[Any, Any]] = []
        self._size_blocks: list[np.ndarray[Any, Any]] = []
        self._keys: list[bytes] = []
        self._sizes: list[int] = []

    def __len__(self) -> int:
        return sum(len(block) for block in self._size_blocks) + len(self._sizes)

    def add(self, path: str, size: int) -> None:
        """Append one file.

        Args:
            path: its full path or URL.
            size: its size in bytes.
        """
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
        self._lengths.append(np.fromiter(map(len, self._keys), dtype=np.int64, count=len(self._keys)))
        self._size_blocks.append(np.array(self._sizes, dtype=np.int64))
        self._keys, self._sizes = [], []

    def _shorten_prefix(self, path: str) -> None:
        """Keep working when a path lacks the prefix: shorten it, and prepend the cut part to what is stored."""
        self._flush()
        shorter = os.path.commonprefix([self._prefix, path])  # noqa: RUF071 - characters, not path parts
        cut = self._prefix[len(shorter) :].encode("utf-8")
        self._prefix = shorter
        if not self._size_blocks:
            return
        lengths = np.concatenate(self._lengths)
        ends = np.cumsum(lengths)
        old = bytes(self._blob)
        pieces = (cut + old[end - length : end] for end, length in zip(ends.tolist(), lengths.tolist(), strict=True))
        self._blob = bytearray(b"".join(pieces))
        self._lengths = [lengths + len(cut)]

    def build(self) -> FileList:
        """The list of every file added, in order."""
        self._flush()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int64)
        sizes = np.concatenate(self._size_blocks) if self._size_blocks else np.zeros(0, dtype=np.int64)
        ends = np.cumsum(lengths, dtype=np.int64)
        starts = ends - lengths
        if len(self._blob) < 2**32:  # offsets of 4 bytes: 8 bytes per file instead of 16
            starts, ends = starts.astype(np.uint32), ends.astype(np.uint32)
        blob = bytes(self._blob)
        self._blob = bytearray()
        self._lengths, self._size_blocks = [], []
        return FileList(self._prefix, blob, starts, ends, sizes)
