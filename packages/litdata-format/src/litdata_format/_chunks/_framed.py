r"""Upstream 0.2.76's in-file zstd layouts (``compression="zstd"`` with ``compression_level``).

``compression_level="batch"`` (upstream's default for ``"zstd"``): a plain ``.bin`` that starts
with the magic ``LDFZ01\0\0``, then a frame table, then zstd frames each holding the bytes of
a run of consecutive items (all little-endian)::

    magic 8s | version u16 (1) | flags u16 | num_items u32 | frame_rows u32 | num_frames u32
    offsets u32[num_items + 1]     item boundaries in the uncompressed item bytes, from 0
    frames[num_frames]: first_item u32 | item_count u32 | file_offset u64 | stored_len u32 | plain_len u32
    the zstd frames

``compression_level="sample"``: the classic header and offsets, but each item's bytes are a
zstd frame of their own. Nothing in the file says so; ``config.compression_level`` does.

The writer builds both from a chunk's item bytes (:func:`pack_batch`, :func:`pack_sample`).
Reading an item costs inflating one frame; :class:`FramedChunk` keeps the last inflated
frame, so reading in order inflates each frame once.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from collections.abc import Sequence

from litdata_format._chunks._chunk import FRAMED_MAGIC, ChunkView, StoredChunk, chunk_parts
from litdata_format._chunks._compression import DEFAULT_FRAME_ROWS, decompress, zstd_module
from litdata_format._samples._serializers import Buffer

__all__ = ["DEFAULT_FRAME_ROWS", "FramedChunk", "SampleZstdChunk", "inflate_zstd", "pack_batch", "pack_sample"]

_PREFIX = struct.Struct("<8sHHIII")
_FRAME = struct.Struct("<IIQII")
_VERSION = 1
_ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"


def inflate_zstd(data: Buffer, where: str, expected_size: int | None = None) -> bytes | bytearray:
    """Decompress one zstd frame, bounded by ``expected_size`` (the frame table's) when known.

    Without it the frame's own content size bounds it; frames written without one are accepted
    too. Errors name ``where``.
    """
    return decompress(data, where.removeprefix("chunk "), expected_size, "the frame table")


def pack_batch(items: Sequence[bytes], level: int, frame_rows: int) -> list[bytes]:
    """A framed chunk holding ``items``, as parts to write back to back.

    Runs of ``frame_rows`` consecutive items are compressed together, each run one zstd frame
    that records its content size (as upstream's frames do).
    """
    count = len(items)
    offsets = [0, *itertools.accumulate(len(item) for item in items)]
    _check_u32(offsets[-1])
    compressor = zstd_module().ZstdCompressor(level=level)
    frames = [compressor.compress(b"".join(items[first : first + frame_rows])) for first in range(0, count, frame_rows)]
    table_end = _PREFIX.size + 4 * (count + 1) + _FRAME.size * len(frames)
    table = bytearray()
    position = table_end
    for k, frame in enumerate(frames):
        first = k * frame_rows
        last = min(first + frame_rows, count)
        table += _FRAME.pack(first, last - first, position, len(frame), offsets[last] - offsets[first])
        position += len(frame)
    _check_u32(position)
    head = _PREFIX.pack(FRAMED_MAGIC, _VERSION, 0, count, frame_rows, len(frames))
    return [head + struct.pack(f"<{count + 1}I", *offsets) + bytes(table), *frames]


def pack_sample(items: Sequence[bytes], level: int) -> list[bytes]:
    """A classic chunk whose items are each compressed as one zstd frame, as parts."""
    compressor = zstd_module().ZstdCompressor(level=level)
    return chunk_parts([compressor.compress(item) for item in items])


def _check_u32(size: int) -> None:
    if size > 0xFFFFFFFF:
        raise ValueError(
            f"a chunk of {size} bytes does not fit the framed layout's 32-bit offsets; lower chunk_bytes or chunk_size"
        )


class FramedChunk(StoredChunk):
    """A ``compression_level="batch"`` chunk: items grouped into zstd frames behind a frame table."""

    def __init__(self, data: Buffer, name: str) -> None:
        super().__init__(data, name)
        size = len(self._view)
        if size < _PREFIX.size or bytes(self._view[: len(FRAMED_MAGIC)]) != FRAMED_MAGIC:
            raise ValueError(f"chunk {name}: not a framed zstd chunk (no LDFZ01 header)")
        _, version, _flags, count, _rows, num_frames = _PREFIX.unpack_from(self._view, 0)
        if version != _VERSION:
            raise ValueError(
                f"chunk {name}: framed zstd version {version} is not supported (only {_VERSION}); "
                "it was written by a newer LitData"
            )
        offsets_end = _PREFIX.size + 4 * (count + 1)
        table_end = offsets_end + _FRAME.size * num_frames
        if table_end > size:
            raise ValueError(
                f"chunk {name}: the frame table of {count} items and {num_frames} frames needs {table_end} bytes "
                f"but the file has {size}; it is truncated"
            )
        offsets: list[int] = list(struct.unpack_from(f"<{count + 1}I", self._view, _PREFIX.size))
        if offsets[0] != 0 or any(a > b for a, b in itertools.pairwise(offsets)):
            raise ValueError(f"chunk {name}: the item offsets are corrupt (not increasing from 0)")
        frames: list[tuple[int, int, int, int, int]] = [
            _FRAME.unpack_from(self._view, offsets_end + k * _FRAME.size) for k in range(num_frames)
        ]
        self._check_frames(frames, offsets, count, table_end, size)
        self._count = count
        self._offsets = offsets
        self._frames = frames
        self._firsts = [frame[0] for frame in frames]
        self._cached: tuple[int, bytes | bytearray] | None = None

    def _check_frames(
        self, frames: list[tuple[int, int, int, int, int]], offsets: list[int], count: int, table_end: int, size: int
    ) -> None:
        expected_first = 0
        for k, (first, items, start, stored, plain) in enumerate(frames):
            if first != expected_first or items == 0:
                raise ValueError(f"chunk {self.name}: frame {k} of the frame table is corrupt (items out of order)")
            expected_first = first + items
            if expected_first > count:
                raise ValueError(f"chunk {self.name}: frame {k} holds items past the chunk's {count} items")
            if start < table_end or start + stored > size:
                raise ValueError(
                    f"chunk {self.name}: frame {k} lies at bytes [{start}, {start + stored}) outside the data "
                    f"area [{table_end}, {size}); the file is truncated or corrupt"
                )
            if plain != offsets[first + items] - offsets[first]:
                raise ValueError(f"chunk {self.name}: frame {k}'s size disagrees with the item offsets")
        if expected_first != count:
            raise ValueError(f"chunk {self.name}: the frames hold {expected_first} items but the header says {count}")

    def _inflate(self, k: int) -> bytes | bytearray:
        cached = self._cached
        if cached is not None and cached[0] == k:
            return cached[1]
        _, _, start, stored, plain = self._frames[k]
        data = (
            b""
            if plain == 0
            else inflate_zstd(self._view[start : start + stored], f"chunk {self.name}, frame {k}", plain)
        )
        self._cached = (k, data)  # one tuple, so a concurrent reader sees either the old or the new frame
        return data

    def item(self, index: int) -> memoryview:
        if not 0 <= index < self._count:
            raise self._out_of_range(index)
        k = bisect.bisect_right(self._firsts, index) - 1
        base = self._offsets[self._frames[k][0]]
        data = self._inflate(k)
        return memoryview(data)[self._offsets[index] - base : self._offsets[index + 1] - base]

    def payload(self) -> memoryview:
        """All items' bytes, back to back, uncompressed."""
        return memoryview(b"".join(self._inflate(k) for k in range(len(self._frames))))

    def _forget(self) -> None:
        self._cached = None
        super()._forget()


class SampleZstdChunk(ChunkView):
    """A ``compression_level="sample"`` chunk: the classic layout whose items are each a zstd frame.

    An item that does not start with the zstd magic is returned as stored: upstream records
    ``compression_level`` for the whole dataset but leaves some chunks unwrapped (e.g. when
    samples are not dicts), and a pytree item cannot start with those bytes (its first u32
    would be a leaf size of about 4 GiB).
    """

    def item(self, index: int) -> memoryview:
        stored = super().item(index)
        if bytes(stored[:4]) != _ZSTD_FRAME_MAGIC:
            return stored
        return memoryview(inflate_zstd(stored, f"chunk {self.name}, item {index}"))

    def payload(self) -> memoryview:
        """All items' bytes, back to back, uncompressed."""
        return memoryview(b"".join(bytes(self.item(i)) for i in range(len(self))))
