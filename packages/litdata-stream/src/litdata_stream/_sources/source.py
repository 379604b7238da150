"""Where a dataset's chunks come from: read in place from local disk, or through the io cache.

A source hands out opened chunks by number, takes a reading order as a prefetch hint, and is
told when a chunk is no longer needed (so the cache may evict it). Sources are created lazily in
the process that reads (never pickled open), from the dataset's ``ChunkOrigin`` (``origin``),
so DataLoader workers each get their own.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from litdata_format import BaseItemLoader, ChunkInfo, DatasetIndex, load_index, verify_file
from litdata_format.internal import (
    Chunk,
    SmallChunkRows,
    check_checksum_fields,
    open_chunk,
    open_listed_chunk,
    small_chunk_rows,
)
from litdata_format.internal import ChunkOpener as OpenChunks
from litdata_stream._sources.readahead import ReadAhead

__all__ = ["ChunkOpener", "ChunkOrigin", "ChunkSource", "LocalSource", "check_verifiable"]

# How a source opens chunk ``info`` of ``index`` stored at ``path`` (given the dataset's encryption).
ChunkOpener = Callable[[str | os.PathLike[str], ChunkInfo, DatasetIndex, Any], Chunk]


@dataclass(frozen=True, eq=False)
class ChunkOrigin:
    """Where a dataset's chunks come from (see ``origin``), and the options a chunk source needs.

    Either ``directory``, the local folder read in place, or ``url`` (``s3://...``, ``local:/drive``)
    fetched into ``cache_dir``, in its subfolder ``version`` for this index. The other fields are the
    dataset's options of the same names (``verify``: ``verify_chunks``).
    """

    index: DatasetIndex
    directory: Path | None = None
    url: str | None = None
    cache_dir: Path | None = None
    version: str | None = None
    index_path: str | None = None
    storage_options: Mapping[str, Any] | None = None
    session_options: Mapping[str, Any] | None = None
    max_cache_size: int | float | str | None = None
    max_pre_download: int = 2
    encryption: Any = None
    verify: bool = False


def check_verifiable(index: DatasetIndex) -> None:
    """What ``verify_chunks=True`` promises, said up front for the whole index (once, in the process that builds it).

    A malformed checksum, or one of an unknown algorithm, is an error naming the chunk; chunks that
    record none (upstream LitData writes none) are read unverified, after one warning naming them.
    """
    missing = check_checksum_fields(index.chunks, index.source)
    if not missing:
        return
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    warnings.warn(
        f"verify_chunks=True: {len(missing)} of the {len(index.chunks)} chunks listed in {index.source} record no "
        f"checksum, so they are read unverified: {shown}. Datasets written by upstream LitData, or by releases "
        "before checksums, carry none; rewrite the dataset with this package's optimize to verify it, or pass "
        "verify_chunks=False",
        UserWarning,
        stacklevel=3,
    )


class ChunkSource(Protocol):
    index: DatasetIndex

    def schedule(self, chunks: list[int]) -> None:
        """Chunks in the order they will be read; a source may fetch ahead."""
        ...

    def chunk(self, number: int) -> Chunk:
        """Chunk ``number``, opened (blocking until it is available)."""
        ...

    def release(self, number: int) -> None:
        """The reader is done with chunk ``number`` for now."""
        ...

    def close(self) -> None: ...


# Chunk files of at most this many bytes get no read-ahead (the format reads, not maps, them).
SMALL_CHUNK = 64 * 1024


class LocalSource:
    """Chunks read in place from a local directory (mapped, never copied).

    Args:
        directory: the dataset directory.
        index: its index (loaded from ``directory`` when None).
        encryption: the key for encrypted datasets.
        keep_open: how many chunks stay mapped at once (random access over a few does not reopen them).
        opener: how chunks are opened.
        verify: check each chunk against its recorded checksum when this process first opens it.
        readahead: chunks to ask into the page cache ahead of the one being read (capped by memory).
    """

    def __init__(self, directory: str | os.PathLike[str], index: DatasetIndex | None = None, encryption: Any = None,
                 keep_open: int = 16, opener: ChunkOpener = open_chunk, verify: bool = False,
                 readahead: int = 0) -> None:  # fmt: skip
        self.directory = Path(directory)
        self._folder = str(self.directory)
        self.index = index if index is not None else load_index(self.directory)
        self.encryption = encryption
        self.opener = opener
        # The format's own opener reads the index's columns (no ChunkInfo per chunk); a loader's
        # own open_chunk is given the entry it asks for.
        self._listed = opener is open_chunk or getattr(opener, "__func__", None) is BaseItemLoader.open_chunk
        table = self.index.table
        self._chunks = OpenChunks(table.filename, table.chunk_sizes, self._open_file, keep_open)
        self._verify = verify
        self._verified: set[int] = set()
        largest = int(table.chunk_bytes.max()) if len(table.chunk_bytes) else 1
        if largest <= SMALL_CHUNK:  # read whole in one call when opened: asking ahead costs as much again
            readahead = 0
        self._ahead = ReadAhead.for_reader(self.directory, table.filename, largest, readahead)

    def _open_file(self, number: int) -> Chunk:
        index = self.index
        path = os.path.join(self._folder, index.table.filename(number))  # a str: cheaper than a Path per chunk
        if self._listed and not self._verify:
            found = open_listed_chunk(path, index, number, self.encryption)
            if self._ahead.depth:
                self._ahead.reached(number)
            return found
        info = index.chunks[number]
        found = self.opener(path, info, index, self.encryption)
        # After opening, which refuses links out of the folder and FIFOs.
        if self._verify and number not in self._verified:
            try:
                # A missing compressed chunk was read from its decompressed sibling, which the opener
                # checked against the index's plain_checksum already.
                if os.path.exists(path):
                    verify_file(path, info, str(self.directory))
            except BaseException:
                found.close()
                raise
            self._verified.add(number)
        self._ahead.reached(number)
        return found

    def schedule(self, chunks: list[int]) -> None:
        self._ahead.schedule(chunks)

    def small_rows(self, loader: BaseItemLoader) -> SmallChunkRows | None:
        """A reader of the rows of this folder's small chunks straight from their files, when ``loader`` allows it.

        None when chunks are verified, or opened by a loader's own ``open_chunk``.
        """
        if not self._listed or self._verify:
            return None
        return small_chunk_rows(loader, self._folder, self.index)

    def chunk(self, number: int) -> Chunk:
        return self._chunks.chunk(number)

    def release(self, number: int) -> None:
        # Unmapped, so the pages it touched leave this process's RSS (random access keeps ``keep_open``).
        self._chunks.release(number)

    def close(self) -> None:
        self._chunks.close()
