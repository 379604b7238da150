"""Whole-chunk compression: ``"zstd"`` (level 4) or ``"zstd:N"`` with N in 1..22.

A compressed chunk is stored as ``chunk-R-I.{compression}.bin`` (the compression string as
given, e.g. ``chunk-0-3.zstd.bin``); ``chunk_bytes`` in the index is its size before
compression, which the reader checks after decompressing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_compression", "compress", "decompress", "zstd_level"]

_DEFAULT_LEVEL = 4


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


def _zstd() -> Any:
    import zstandard

    return zstandard


def compress(data: bytes, compression: str) -> bytes:
    """Compress a whole chunk."""
    return _zstd().ZstdCompressor(level=zstd_level(compression)).compress(data)


def decompress(data: bytes | memoryview, name: str, expected_size: int | None = None) -> bytes:
    """Decompress a whole chunk, checking its size against the index's ``chunk_bytes``."""
    zstandard = _zstd()
    try:
        out = zstandard.ZstdDecompressor().decompress(data, max_output_size=expected_size if expected_size else 0)
    except zstandard.ZstdError as err:
        raise ValueError(f"chunk {name}: zstd decompression failed ({err}); the file is corrupt or truncated") from None
    if expected_size is not None and len(out) != expected_size:
        raise ValueError(f"chunk {name}: decompressed to {len(out)} bytes but the index says {expected_size}")
    return out
