"""Opening a chunk file, as stored (maybe compressed, maybe encrypted), in whichever layout it has.

The layouts are told apart by their bytes: the framed zstd layout starts with its magic, the
Arrow rows layout ends with its magic, anything else is the classic layout.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from litdata_format._chunks._arrow_rows import ArrowRowsChunk, is_arrow_rows_chunk
from litdata_format._chunks._checksum import verify_file
from litdata_format._chunks._chunk import ARROW_ROWS_MAGIC, FRAMED_MAGIC, Chunk, ChunkView, map_file
from litdata_format._chunks._compression import decompress
from litdata_format._chunks._framed import FramedChunk, SampleZstdChunk
from litdata_format._chunks._mds import is_mds_index, open_mds_shard
from litdata_format._index._dataset_index import ChunkInfo, DatasetIndex
from litdata_format._index._index_json import cached_chunk_sizes, check_chunk_file, plain_chunk_name

__all__ = ["open_chunk", "open_listed_chunk"]


def open_chunk(
    path: str | os.PathLike[str],
    info: ChunkInfo,
    index: DatasetIndex,
    encryption: Any = None,
) -> Chunk:
    """Open the chunk stored at ``path`` (described by ``info`` in ``index``).

    Whole-file compressed chunks (``*.zstd.bin``) are decompressed into memory, bounded by the size
    the index declares (a cache decompresses to a plain file once instead, :func:`decompress_file`).
    When the compressed file is gone but its decompressed sibling is there, as upstream 0.2.76
    leaves a local folder it has read, the sibling is read once its size and ``plain_checksum``
    match. ``encryption`` decrypts an encrypted dataset.

    Raises:
        ValueError: the file's size (or decompressed size) is not the index's ``chunk_bytes`` (the
            message names the file and both sizes), or its bytes are not a chunk.
    """
    name = os.fspath(path)  # no Path: building one costs more than the rest of opening a small chunk
    check_chunk_file(name, info.filename, index.source)
    if is_mds_index(index):
        return open_mds_shard(Path(name), info, index)
    compression = index.compression
    if compression and name.endswith(f".{compression}.bin") and not os.path.exists(name):
        name = str(_decompressed_sibling(Path(name), info, index, compression))
    data: Any
    if compression and name.endswith(f".{compression}.bin"):
        with open(name, "rb") as file:  # streamed from the file: neither side is held whole twice
            data = decompress(file, name, cached_chunk_sizes(info))
    else:
        data = map_file(name)
        _check_size(len(data), name, info, index)
    decrypt: Callable[[Any], bytes] | None = None
    if index.encryption:
        if encryption is None:
            raise ValueError(
                f"Data is encrypted but no encryption object was provided. {index.source}: the dataset is "
                f"encrypted ({index.encryption.get('algorithm')}, level {index.encryption.get('level')}); pass "
                "encryption=... with the key it was written with"
            )
        encryption.check_matches(index.encryption, index.source)
        if encryption.level == "chunk":  # the level the index records, when it records one
            data = bytearray(encryption.decrypt(data, where=name))
        else:

            def decrypt_item(item: Any) -> bytes:
                return encryption.decrypt(item, where=name)

            decrypt = decrypt_item
    return _in_layout(data, name, index, decrypt)


def open_listed_chunk(path: str, index: DatasetIndex, number: int, encryption: Any = None) -> Chunk:
    """:func:`open_chunk` for chunk ``number`` of ``index``, from the index's columns.

    The same checks and the same chunk; a plain chunk (not whole-file compressed, not encrypted,
    not an MDS shard, no ``raw_filename``) is opened without building its ``ChunkInfo`` (which 100k
    small chunks would pay per epoch) and, in its folder itself, opened with ``O_NOFOLLOW`` instead
    of a separate ``lstat``: only a link is looked at further (:func:`check_chunk_file`).
    """
    table = index.table
    if index.compression or index.encryption or is_mds_index(index) or table.has_extra("raw_filename"):
        return open_chunk(path, table[number], index, encryption)
    filename = table.filename(number)
    if "/" in filename:
        check_chunk_file(path, filename, index.source)
        data = map_file(path)
    else:
        try:
            data = map_file(path, follow=False)
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise
            check_chunk_file(path, filename, index.source)  # a link: refused unless it stays in the folder
            data = map_file(path)
    nbytes = int(table.chunk_bytes[number])
    if nbytes > 0 and len(data) != nbytes and len(data) != nbytes + 4 * (int(table.chunk_sizes[number]) + 2):
        _check_size(len(data), path, table[number], index)  # raises, naming the file and both sizes
    return _in_layout(data, path, index, None)


def _in_layout(data: Any, name: str, index: DatasetIndex, decrypt: Callable[[Any], bytes] | None) -> Chunk:
    """The chunk over ``data`` (plain bytes, decompressed and decrypted), in the layout its bytes have."""
    view = memoryview(data)
    if bytes(view[: len(FRAMED_MAGIC)]) == FRAMED_MAGIC:
        return FramedChunk(data, name)
    if bytes(view[-len(ARROW_ROWS_MAGIC) :]) == ARROW_ROWS_MAGIC and is_arrow_rows_chunk(view):
        return ArrowRowsChunk(data, name)
    if index.config.get("compression_level") == "sample":
        return SampleZstdChunk(data, name, decrypt)
    return ChunkView(data, name, decrypt)


def _decompressed_sibling(path: Path, info: ChunkInfo, index: DatasetIndex, compression: str) -> Path:
    """The decompressed file next to the missing compressed chunk ``path``, checked; else ``path`` itself.

    Upstream LitData 0.2.76, reading a local dataset folder, replaces each ``chunk-*.zstd.bin`` with
    the decompressed ``chunk-*.bin`` and leaves index.json as it was; people who read a folder with
    both libraries would otherwise be stranded.
    """
    sibling = path.with_name(path.name[: -len(f".{compression}.bin")] + ".bin")
    plain_name = plain_chunk_name(info, compression)
    check_chunk_file(sibling, plain_name, index.source)
    if not sibling.is_file():
        return path  # neither file: the opener says the compressed one is missing
    # Written by another program: it must be the very bytes the compressed chunk holds.
    verify_file(sibling, info, f"{index.source}, read as its decompressed sibling {plain_name}", plain=True)
    return sibling


def _check_size(size: int, path: str, info: ChunkInfo, index: DatasetIndex) -> None:
    """Refuse a chunk file whose size is not the one its index entry gives (the mapping's length: no syscall)."""
    sizes = cached_chunk_sizes(info)
    if sizes and size not in sizes:
        raise ValueError(
            f"{index.source}: chunk {info.filename} at {path} has {size} bytes but index.json says "
            f"{info.chunk_bytes} (chunk_bytes); the file was cut short, appended to or rewritten, or the index "
            "belongs to another version of the dataset: restore the file, or rewrite the dataset"
        )
