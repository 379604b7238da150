"""The chunk layout: ``u32 N | u32 offsets[N+1] | item bytes``, little-endian, offsets absolute.

Reading maps the file and hands out ``memoryview`` slices of it, so an item costs no copy until
a serializer decodes it. A chunk is validated when opened (count, offsets monotonic and inside
the file), so a truncated or corrupt file fails with its name instead of returning garbage.
"""

from __future__ import annotations

import itertools
import mmap
import operator
import os
import stat
import struct
import sys
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from litdata_format._samples._serializers import Buffer

__all__ = [
    "ARROW_ROWS_MAGIC",
    "FRAMED_MAGIC",
    "READ_BELOW",
    "Chunk",
    "ChunkView",
    "StoredChunk",
    "chunk_parts",
    "encode_chunk",
    "header_size",
]

# Layouts that upstream 0.2.76 writes inside a plain ``.bin``, told apart by these magics.
FRAMED_MAGIC = b"LDFZ01\x00\x00"  # at the start: zstd frames of items plus a frame table
ARROW_ROWS_MAGIC = b"LDARW01\x00"  # at the end: an Arrow IPC file of the rows


_SMALL_TABLE = 256
_LITTLE = sys.byteorder == "little"  # memoryview.cast reads native order; the format is little-endian


def header_size(num_items: int) -> int:
    """Bytes taken by the count and the offsets table of a chunk holding ``num_items`` items."""
    return 4 * (num_items + 2)


def encode_chunk(items: Sequence[bytes]) -> bytes:
    """The bytes of a chunk holding ``items`` (each item's bytes) in order."""
    return b"".join(chunk_parts(items))


def chunk_parts(items: Sequence[bytes]) -> list[bytes]:
    """The chunk holding ``items`` as its parts: the header (count and offsets), then the items.

    Writing the parts with one gathered write saves building the chunk in memory first.
    """
    count = len(items)
    small = count <= _SMALL_TABLE  # a few Python ints cost less than numpy's calls (a chunk of 4 samples)
    offsets: Any
    if small:
        offsets = list(itertools.accumulate(map(len, items), initial=header_size(count)))
    else:
        offsets = np.empty(count + 1, dtype="<u8")
        offsets[0] = header_size(count)
        np.cumsum([len(item) for item in items], out=offsets[1:])
        offsets[1:] += offsets[0]
    if offsets[-1] > 0xFFFFFFFF:
        raise ValueError(
            f"a chunk of {int(offsets[-1])} bytes does not fit the format's 32-bit offsets; "
            "lower chunk_bytes or chunk_size"
        )
    if small:
        return [struct.pack(f"<{count + 2}I", count, *offsets), *items]
    return [np.concatenate([np.array([count], dtype="<u4"), offsets.astype("<u4")]).tobytes(), *items]


def map_file(path: str | os.PathLike[str], follow: bool = True) -> mmap.mmap | bytearray:
    """Map a chunk file into memory (a file of at most 64 KiB is read into a bytearray instead).

    The mapping is private copy-on-write (``ACCESS_COPY``): nothing is copied unless written,
    and zero-copy tensors over it get the writable buffer torch asks for (a bytearray is writable too).
    Without ``follow``, opening a symbolic link fails (``ELOOP``).
    """
    # O_NONBLOCK: opening a FIFO must not wait for a writer; anything but a regular file is refused.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags if follow else flags | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"chunk {path}: not a regular file (mode {oct(info.st_mode)}); refusing to read it")
        if info.st_size == 0:
            raise ValueError(f"chunk {path}: the file is empty")
        if info.st_size <= READ_BELOW:
            return _read_whole(fd, info.st_size, path)
        return mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
    finally:
        os.close(fd)


# Files this small are read rather than mapped: a mapping costs more syscalls (mmap, the page
# fault, munmap) than copying a few pages, and a dataset of 100k small chunks opens each once.
READ_BELOW = 64 * 1024


def _read_whole(fd: int, size: int, path: str | os.PathLike[str]) -> bytearray:
    """The ``size`` bytes of the open file ``fd``, in a writable buffer (as a copy-on-write mapping is)."""
    data = bytearray(size)
    view = memoryview(data)
    done = 0
    while done < size:
        got = os.readv(fd, [view[done:]])
        if got == 0:
            raise ValueError(f"chunk {path}: the file shrank to {done} bytes while it was read (it is being rewritten)")
        done += got
    return data


class Chunk(Protocol):
    """What item loaders read from: a chunk whose items can be fetched by position.

    Attributes:
        name: the chunk's file (path or URL), for messages.
        views: arrays item loaders derive from the chunk once (rows, token blocks), by name;
            cleared when the chunk is closed.
    """

    name: str
    views: dict[str, Any]

    def __len__(self) -> int: ...

    def item(self, index: int) -> memoryview:
        """The bytes of item ``index`` (plaintext, uncompressed)."""
        ...

    def payload(self) -> memoryview:
        """Everything after the offsets table (TokensLoader reads this as one token stream)."""
        ...

    def close(self) -> None:
        """Release what the chunk holds (a mapping, a file); item views already handed out stay valid."""
        ...


class StoredChunk:
    """What every chunk layout shares: buffer, name, item count and range, offsets table, release.

    A layout checks its own header in ``__init__`` (after this one) and sets ``_count`` and
    ``_offsets``: item i is ``raw()[offsets[i]:offsets[i + 1]]``; layouts whose items are stored
    otherwise override :meth:`item` and :meth:`payload`. ``data`` is an mmap of the file, or bytes
    already in memory; ``name`` is the file name, for error messages.
    """

    #: How error messages call the chunk and its items (an MDS shard holds samples).
    noun, item_noun = "chunk", "item"

    def __init__(self, data: Buffer, name: str) -> None:
        self.name = name
        self._owner = data
        view = memoryview(data)
        self._view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self._count = 0
        self._offsets: list[int] = [0]
        # Arrays that item loaders derive from this chunk once (rows, token blocks), by name.
        self.views: dict[str, Any] = {}

    def _read_offsets(self, limit: int, exact_start: bool = True, where: str = "") -> None:
        """Read the classic header from the start of the buffer: ``u32 N | u32 offsets[N+1]``.

        The offsets must start where the table ends (or after it, unless ``exact_start``), never
        decrease, and end within the first ``limit`` bytes (``where`` says what lies after).
        """
        noun, name = self.noun, self.name
        if limit < 4:
            raise ValueError(f"{noun} {name}: {limit} bytes is too short to hold the {self.item_noun} count")
        count = int.from_bytes(self._view[:4], "little")
        table_end = header_size(count)
        if table_end > limit:
            raise ValueError(
                f"{noun} {name}: says it holds {count} {self.item_noun}s but its {limit} bytes{where} cannot hold "
                f"the offsets table; the file is truncated or not a {noun}"
            )
        if count <= _SMALL_TABLE and _LITTLE:  # a few Python ints cost less than numpy's calls
            offsets: list[int] = self._view[4:table_end].cast("I").tolist()
            increasing = all(map(operator.le, offsets, offsets[1:]))
        else:
            table = np.frombuffer(self._view[4:table_end], dtype="<u4").astype(np.int64)
            increasing = not np.any(np.diff(table) < 0)
            offsets = table.tolist()
        start_ok = offsets[0] == table_end if exact_start else offsets[0] >= table_end
        if not start_ok or not increasing:
            raise ValueError(f"{noun} {name}: the offsets table is corrupt (not increasing from the header end)")
        if offsets[-1] > limit:
            raise ValueError(
                f"{noun} {name}: offsets end at {offsets[-1]} but the file has {limit} bytes{where}; "
                "it is truncated (re-download or re-create it)"
            )
        self._count = count
        self._offsets = offsets

    def __len__(self) -> int:
        return self._count

    def _out_of_range(self, index: int) -> IndexError:
        return IndexError(f"{self.noun} {self.name}: {self.item_noun} {index} is out of range (it holds {self._count})")

    def item(self, index: int) -> memoryview:
        """The bytes of item ``index`` as stored."""
        if not 0 <= index < self._count:
            raise self._out_of_range(index)
        return self._view[self._offsets[index] : self._offsets[index + 1]]

    def raw(self) -> memoryview:
        """The whole chunk as stored (after whole-file decompression and decryption)."""
        return self._view

    def payload(self) -> memoryview:
        """The items' bytes back to back (TokensLoader reads this as one token stream)."""
        return self._view[self._offsets[0] : self._offsets[-1]]

    def _forget(self) -> None:
        """Drop what was derived from the buffer, before :meth:`close` releases it."""
        self.views.clear()

    def close(self) -> None:
        """Release the buffer (an mmap is unmapped) once no item view is alive; otherwise the GC does it later."""
        self._forget()
        try:
            self._view.release()
            close = getattr(self._owner, "close", None)
            if close is not None:
                close()
        except BufferError:
            pass


class ChunkView(StoredChunk):
    """A classic chunk over a buffer; ``decrypt`` decrypts each item's bytes (per-sample encryption)."""

    def __init__(self, data: Buffer, name: str, decrypt: Any = None) -> None:
        super().__init__(data, name)
        self._decrypt = decrypt
        self._read_offsets(len(self._view))

    @classmethod
    def open(cls, path: str | os.PathLike[str], decrypt: Any = None) -> ChunkView:
        """Map the chunk file ``path`` (no copy) and validate it; ``decrypt`` as for the class."""
        return cls(map_file(path), str(path), decrypt)

    @property
    def offsets(self) -> list[int]:
        """The offsets table: item i is ``raw()[offsets[i]:offsets[i + 1]]``."""
        return self._offsets

    @property
    def decrypts(self) -> bool:
        """Whether items are decrypted one by one when read (their stored bytes are ciphertext)."""
        return self._decrypt is not None

    def item(self, index: int) -> memoryview:
        # The base's body again rather than a call to it: this is the read of every sample.
        if not 0 <= index < self._count:
            raise self._out_of_range(index)
        view = self._view[self._offsets[index] : self._offsets[index + 1]]
        return view if self._decrypt is None else memoryview(self._decrypt(view))
