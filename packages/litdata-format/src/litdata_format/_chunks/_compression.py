"""Chunk compression: ``"zstd"`` (level 4) or ``"zstd:N"`` with N in 1..22, at one of three levels.

``compression_level="chunk"`` (the default here) compresses the whole file: it is stored as
``chunk-R-I.{compression}.bin`` (the compression string as given, e.g. ``chunk-0-3.zstd.bin``)
and ``chunk_bytes`` in the index is its size before compression, which the reader checks after
decompressing. ``"batch"`` and ``"sample"`` compress inside a plain ``.bin`` (runs of items or
single items, see ``_framed.py``); ``chunk_bytes`` is then the file's size.

Every zstd frame a reader inflates goes through :func:`_inflate`, streamed and bounded by the
size something trustworthy declares (the index, a frame table), never by the frame's own claim.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "DEFAULT_FRAME_ROWS",
    "LEVELS",
    "DecompressionError",
    "check_compression",
    "check_compression_level",
    "compress",
    "decompress",
    "decompress_file",
    "zstd_level",
    "zstd_module",
]

_DEFAULT_LEVEL = 4
LEVELS = ("chunk", "batch", "sample")
DEFAULT_FRAME_ROWS = 256  # items per zstd frame of compression_level="batch" (upstream's compression_batch_size)


def zstd_level(compression: str) -> int:
    """The zstd level a compression string asks for, or a clear error."""
    name, _, level = compression.partition(":")
    if name == "zstd_framed":  # an upstream pre-release name; upstream's words first
        raise ValueError(
            f"compression={compression!r} is not a codec. Use compression='zstd' with compression_level='batch' "
            "(zstd frames of runs of items inside a plain .bin)"
        )
    if name != "zstd":
        # Upstream's sentence first: code written for upstream matches it.
        raise ValueError(
            f"The provided compression {compression} isn't available in ['zstd']: "
            f"compression={compression!r} is not supported; use 'zstd' or 'zstd:1'..'zstd:22'"
        )
    if not level:
        return _DEFAULT_LEVEL
    if not level.isdigit() or not 1 <= int(level) <= 22:
        raise ValueError(f"compression={compression!r}: the zstd level must be an integer from 1 to 22")
    return int(level)


def check_compression(compression: Any) -> str | None:
    """Validate the ``compression`` option (None or a zstd string)."""
    if compression is None:
        return None
    if not isinstance(compression, str):
        raise TypeError(f"compression must be None or a string like 'zstd', got {compression!r}")
    zstd_level(compression)
    return compression


def check_compression_level(
    compression: str | None, compression_level: Any, compression_batch_size: Any
) -> tuple[str | None, int | None]:
    """Validate ``compression_level`` / ``compression_batch_size``; return the level and the items per frame.

    The level is None without compression. With compression it defaults to ``"chunk"``, or to
    ``"batch"`` when ``compression_batch_size`` is given (a frame size only means something
    there). The items per frame are None unless the level is ``"batch"`` (256 by default).
    """
    if isinstance(compression_level, int) and not isinstance(compression_level, bool):
        raise ValueError(
            f"compression_level={compression_level!r} is how much goes into one zstd frame, not the zstd level: "
            f"use compression='zstd:{compression_level}' for the level and compression_level='chunk', 'batch' "
            "or 'sample'"
        )
    if compression_level is not None and compression_level not in LEVELS:
        raise ValueError(f"compression_level must be None, 'chunk', 'batch' or 'sample', got {compression_level!r}")
    if compression_batch_size is not None and (
        isinstance(compression_batch_size, bool)
        or not isinstance(compression_batch_size, int)
        or compression_batch_size < 1
    ):
        raise ValueError(
            f"compression_batch_size must be a positive int (items per frame), got {compression_batch_size!r}"
        )
    if compression is None:
        if compression_level in ("batch", "sample") or compression_batch_size is not None:
            given = (
                f"compression_level={compression_level!r}"
                if compression_batch_size is None
                else f"compression_batch_size={compression_batch_size!r}"
            )
            raise ValueError(f"{given} compresses items with zstd: also pass compression='zstd' (or 'zstd:N')")
        return None, None
    level = compression_level or ("batch" if compression_batch_size is not None else "chunk")
    if level != "batch":
        if compression_batch_size is not None:
            raise ValueError(
                f"compression_batch_size is the number of items per zstd frame of compression_level='batch'; "
                f"it means nothing with compression_level={level!r}"
            )
        return level, None
    return level, compression_batch_size or DEFAULT_FRAME_ROWS


def zstd_module() -> Any:
    """The ``zstandard`` module, imported on first use."""
    import zstandard

    return zstandard


def compress(data: bytes, compression: str) -> bytes:
    """Compress a whole chunk's bytes with ``compression`` (``"zstd"`` or ``"zstd:<level>"``)."""
    return zstd_module().ZstdCompressor(level=zstd_level(compression)).compress(data)


# Decompressed output is produced in pieces this large, so a chunk that inflates past what its
# index declares is stopped after at most one piece more than that, whatever its frames claim.
_PIECE = 1 << 20


def _allowed(expected_size: int | Sequence[int] | None) -> tuple[int, ...]:
    if expected_size is None:
        return ()
    if isinstance(expected_size, int):
        return (expected_size,) if expected_size > 0 else ()
    return tuple(size for size in expected_size if size > 0)


def _declared(sizes: tuple[int, ...], declared_by: str) -> str:
    # The first size is the one declared; the others are allowances (see cached_chunk_sizes).
    field = " (chunk_bytes)" if declared_by == "index.json" else ""
    return f"{declared_by} declares {sizes[0]} bytes{field}"


def _inflate(
    source: Any,
    write: Callable[[bytes], object],
    name: str,
    expected_size: int | Sequence[int] | None,
    declared_by: str,
) -> int:
    """Stream zstd ``source`` (bytes-like, or a binary file) into ``write``; the one place chunks inflate.

    The bound is the largest size the index allows; output is produced :data:`_PIECE` at a
    time, so memory stays at a piece, the input buffer and zstd's window (at most 128 MiB,
    zstd's default limit) whatever the frames claim. Without a declared size, the first frame's
    own content size is the expectation when it records one.

    Returns:
        The number of bytes written.
    """
    zstandard = zstd_module()
    sizes = _allowed(expected_size)
    in_memory = not hasattr(source, "read")
    head = bytes(memoryview(source)[:18]) if in_memory else None
    try:
        if head is None:
            position = source.tell()
            head = source.read(18)
            source.seek(position)
        try:
            claimed = zstandard.get_frame_parameters(head).content_size
        except zstandard.ZstdError:
            claimed = zstandard.CONTENTSIZE_UNKNOWN  # too short or not zstd: the reader below says which
        if claimed in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR):
            claimed = None
        if not sizes and claimed is not None:
            sizes, declared_by = (claimed,), "its zstd frame header"
        limit = max(sizes) if sizes else None
        if limit is not None and claimed is not None and claimed > limit:
            # A frame never holds more than the whole file: refuse before inflating a byte.
            raise DecompressionError(
                f"chunk {name}: its zstd frame header claims {claimed} bytes but {_declared(sizes, declared_by)}; "
                "refusing to decompress it (the file does not belong to this index, or is damaged or hostile): "
                "rewrite the chunk, or the dataset, at the source"
            )
        if in_memory and claimed is not None and claimed <= _ONE_SHOT and _one_frame(source):
            # One frame whose header records its size, within the bound: inflate it in one call
            # (zstd fails a frame whose content differs from that size, so the bound holds).
            piece = _decompressor().decompress(source)
            total = len(piece)
            if limit is not None and total > limit:  # claimed <= limit was checked above
                raise DecompressionError(f"chunk {name}: decompressed past its frame header's {claimed} bytes")
            write(piece)
            return _checked_total(total, sizes, name, declared_by, source)
        total = 0
        reader = _decompressor().stream_reader(source, read_size=_PIECE, read_across_frames=True)
        with reader:
            while True:
                want = _PIECE if limit is None else min(_PIECE, limit + 1 - total)
                piece = reader.read(want)
                if not piece:
                    break
                total += len(piece)
                if limit is not None and total > limit:
                    raise DecompressionError(
                        f"chunk {name}: decompresses to more than {limit} bytes but {_declared(sizes, declared_by)}; "
                        "stopped there (the file does not belong to this index, or is damaged or hostile): "
                        "rewrite the chunk, or the dataset, at the source"
                    )
                write(piece)
    except zstandard.ZstdError as err:
        raise DecompressionError(
            f"chunk {name}: zstd decompression failed ({err}); the file is corrupt or truncated"
        ) from None
    return _checked_total(total, sizes, name, declared_by, source)


def _checked_total(total: int, sizes: tuple[int, ...], name: str, declared_by: str, source: Any) -> int:
    if not sizes and not _frames_complete(source):
        raise DecompressionError(f"chunk {name}: its zstd frame is truncated; the file is corrupt or was cut short")
    if sizes and total not in sizes:
        raise DecompressionError(
            f"chunk {name}: decompressed to {total} bytes but {_declared(sizes, declared_by)}; the file is "
            "truncated or does not belong to this index: fetch or rewrite it again"
        )
    return total


# Frames up to this size (as their header records it) inflate in one call rather than in pieces.
_ONE_SHOT = 16 << 20
_LOCAL = threading.local()


def _decompressor() -> Any:
    """This thread's zstd decompressor (one per thread: a decompressor is not thread-safe)."""
    found = getattr(_LOCAL, "decompressor", None)
    if found is None:
        found = _LOCAL.decompressor = zstd_module().ZstdDecompressor()
    return found


def _one_frame(source: Any) -> bool:
    """Whether the bytes-like ``source`` is exactly one zstd frame (then a one-call inflate reads it all)."""
    view = memoryview(source).cast("B")
    return _frame_end(view, 0) == len(view)


_ZSTD_MAGIC = 0xFD2FB528
_FCS_BYTES = (0, 2, 4, 8)
_DICT_BYTES = (0, 1, 2, 4)


def _frames_complete(source: Any) -> bool:
    """Whether the zstd frames in ``source`` (bytes-like or a file) end with their last block.

    zstd's stream reader ends quietly at the end of the input, so without a size to compare with
    a cut-short frame would pass for a whole one. Walking the block headers costs no inflating.
    """
    if hasattr(source, "fileno"):
        size = os.fstat(source.fileno()).st_size
        if not size:
            return False
        with mmap.mmap(source.fileno(), size, access=mmap.ACCESS_READ) as mapped:
            return _frames_complete(mapped)
    view = memoryview(source).cast("B")
    end, at = len(view), 0
    while at < end:
        if at + 8 > end:
            return False
        magic = int.from_bytes(view[at : at + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: its size follows its magic
            at += 8 + int.from_bytes(view[at + 4 : at + 8], "little")
            continue
        found = _frame_end(view, at)
        if found is None:
            return False
        at = found
    return end > 0


def _frame_end(view: memoryview, at: int) -> int | None:
    """Where the zstd frame starting at ``at`` ends (walking its block headers), or None if it is not one or is cut."""
    end = len(view)
    if at + 5 > end or int.from_bytes(view[at : at + 4], "little") != _ZSTD_MAGIC:
        return None
    descriptor = view[at + 4]
    single = descriptor >> 5 & 1
    fcs = _FCS_BYTES[descriptor >> 6] or single
    at += 5 + (not single) + _DICT_BYTES[descriptor & 3] + fcs
    while True:
        if at + 3 > end:
            return None
        header = int.from_bytes(view[at : at + 3], "little")
        kind, size = header >> 1 & 3, header >> 3
        at += 3 + (1 if kind == 1 else size)  # an RLE block stores one byte
        if header & 1:
            break
    at += 4 * (descriptor >> 2 & 1)  # the content checksum
    return at if at <= end else None


class DecompressionError(ValueError):
    """A compressed chunk is not valid zstd, or inflates to another size than its index declares."""


def decompress(
    data: Any, name: str, expected_size: int | Sequence[int] | None = None, declared_by: str = "index.json"
) -> bytearray:
    """Decompress a whole chunk into memory, bounded by the size its index declares.

    Output grows only as bytes actually come out of the frames (nothing is allocated up front
    from a size a header claims), and stops one piece past the largest allowed size.

    Args:
        data: the compressed bytes (bytes-like), or a binary file open at their start.
        name: the chunk's file name or URL, for error messages.
        expected_size: the index's ``chunk_bytes``, or every size it allows (see
            ``cached_chunk_sizes``); None or 0: the first frame's own content size, when it records one.
        declared_by: what declares the size, for error messages.

    Raises:
        DecompressionError: (a ValueError) the data is not valid zstd, or decompresses to another
            size than ``expected_size``; the message names the chunk, the declared size and what was found.
    """
    out = bytearray()
    _inflate(data, out.extend, name, expected_size, declared_by)
    return out


def decompress_file(
    source: str | os.PathLike[str], target: str | os.PathLike[str], name: str, expected_size: int | Sequence[int] | None
) -> int:
    """Decompress the whole-chunk file ``source`` into a new file ``target``, bounded by the declared size.

    Streams: memory stays at about 2 MiB plus zstd's window whatever the file inflates to.
    ``target`` must not exist and is removed on an error; publish it with a rename, as the cache
    does. ``name`` and ``expected_size`` are as for :func:`decompress`, and so are the errors.

    Returns:
        The size of ``target``.
    """
    with open(source, "rb") as inp, open(target, "xb") as out:
        try:
            return _inflate(inp, out.write, name, expected_size, "index.json")
        except BaseException:
            out.close()
            os.unlink(target)
            raise
