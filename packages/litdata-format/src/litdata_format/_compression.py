"""Chunk compression: ``"zstd"`` (level 4) or ``"zstd:N"`` with N in 1..22, at one of three levels.

``compression_level="chunk"`` (the default here) compresses the whole file: it is stored as
``chunk-R-I.{compression}.bin`` (the compression string as given, e.g. ``chunk-0-3.zstd.bin``)
and ``chunk_bytes`` in the index is its size before compression, which the reader checks after
decompressing. ``"batch"`` and ``"sample"`` compress inside a plain ``.bin`` (runs of items or
single items, see ``_framed.py``); ``chunk_bytes`` is then the file's size.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LEVELS", "check_compression", "check_compression_level", "compress", "decompress", "zstd_level"]

_DEFAULT_LEVEL = 4
LEVELS = ("chunk", "batch", "sample")


def zstd_level(compression: str) -> int:
    """The zstd level a compression string asks for, or a clear error."""
    name, _, level = compression.partition(":")
    if name != "zstd":
        raise ValueError(f"compression={compression!r} is not supported; use 'zstd' or 'zstd:1'..'zstd:22'")
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
    from litdata_format._framed import DEFAULT_FRAME_ROWS

    return level, compression_batch_size or DEFAULT_FRAME_ROWS


def _zstd() -> Any:
    import zstandard

    return zstandard


def compress(data: bytes, compression: str) -> bytes:
    """Compress a whole chunk.

    Args:
        data: the chunk file's bytes.
        compression: ``"zstd"`` or ``"zstd:<level>"``.
    """
    return _zstd().ZstdCompressor(level=zstd_level(compression)).compress(data)


def decompress(data: bytes | memoryview, name: str, expected_size: int | None = None) -> bytes:
    """Decompress a whole chunk, checking its size against the index's ``chunk_bytes``.

    Args:
        data: the compressed file's bytes.
        name: the chunk's file name, for error messages.
        expected_size: the index's ``chunk_bytes``; None skips the check.

    Raises:
        ValueError: the data is not valid zstd, or decompresses to another size than ``expected_size``.
    """
    zstandard = _zstd()
    try:
        out = zstandard.ZstdDecompressor().decompress(data, max_output_size=expected_size if expected_size else 0)
    except zstandard.ZstdError as err:
        raise ValueError(f"chunk {name}: zstd decompression failed ({err}); the file is corrupt or truncated") from None
    if expected_size is not None and len(out) != expected_size:
        raise ValueError(f"chunk {name}: decompressed to {len(out)} bytes but the index says {expected_size}")
    return out
