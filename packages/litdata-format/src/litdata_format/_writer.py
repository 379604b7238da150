"""``BinaryWriter``: samples in, chunk files and an index out.

Each writer (one per worker, told apart by ``rank``) fills chunks up to ``chunk_size`` items
(tokens for TokensLoader) or ``chunk_bytes`` bytes, writes them as ``chunk-{rank}-{i}.bin``
through a temporary name and a rename, and at the end writes ``{rank}.index.json``. One process
then merges the rank files into ``index.json`` (:meth:`BinaryWriter.merge` or
:func:`complete_dataset`).
"""

from __future__ import annotations

import bisect
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from litdata_format._atomic import write_file_atomic
from litdata_format._chunks._arrow_write import (
    NULL,
    ROW_BATCH,
    ArrowUnfit,
    NotARow,
    RowScan,
    RowsIpc,
    arrow_available,
    find_conflict,
    fuse_kinds,
    holds_bytes,
    import_arrow_soon,
    is_flat,
    pack_arrow_rows,
    scan_row,
    unwrap_leaves,
)
from litdata_format._chunks._checksum import checksum_bytes
from litdata_format._chunks._chunk import ARROW_ROWS_MAGIC, chunk_parts, header_size
from litdata_format._chunks._compression import check_compression, check_compression_level, compress, zstd_level
from litdata_format._chunks._encryption import Encryption
from litdata_format._chunks._framed import pack_batch, pack_sample
from litdata_format._index._dataset_index import INDEX_FILENAME, ChunkInfo, DatasetIndex
from litdata_format._index._index_json import (
    chunk_name,
    complete_dataset,
    rank_index_files,
    rank_index_name,
    write_json_atomic,
)
from litdata_format._loaders._item_loaders import BaseItemLoader, PyTreeLoader
from litdata_format._samples._encode import OtherStructureError
from litdata_format._samples._json_leaf import JsonLeaf
from litdata_format._samples._registry import resolve_serializers
from litdata_format._samples._serializers import Serializer
from litdata_format._sizes import parse_size

__all__ = ["DEFAULT_CHUNK_BYTES", "BinaryWriter", "WriterOptions", "check_writer_options"]

DEFAULT_CHUNK_BYTES = 1 << 26
# Items at least this big on average are written as parts; for smaller ones the kernel's cost per
# buffer of a gathered write exceeds the copy of joining them (measured: 20 KB items 8.7 -> 7.9 ms
# per 8 MB chunk, 540 B items 9.9 -> 11.8 ms).
_GATHER_ITEM_BYTES = 4096
# How often a chunk's Arrow rows may start their IPC file over because a later row widened their
# kind (a key first seen, a value where there were only None); past that the chunk is built at its end.
_ROWS_RESTARTS = 2


class BinaryWriter:
    """Writes samples into chunk files in the LitData layout.

    When the first sample is a plain dict of JSON-like values, pyarrow is installed and neither
    encryption, custom serializers nor another item loader is given, every chunk is written as
    upstream 0.2.76's Arrow rows (``LDARW01``): see :mod:`litdata_format._chunks._arrow_write`.

    Args:
        cache_dir: the dataset directory (created if missing); upstream's name for it.
        chunk_size: the most items per chunk (tokens, with TokensLoader).
        chunk_bytes: the most bytes per chunk, as an int or a string like ``"64MB"``. Give at
            most one of chunk_size and chunk_bytes; with neither, chunks hold 64 MiB.
        compression: None, ``"zstd"`` (level 4) or ``"zstd:N"`` (N in 1..22).
        compression_level: ``"chunk"`` (the default: the whole file, ``chunk-R-I.zstd.bin``),
            ``"batch"`` (runs of items, each a zstd frame inside a plain ``.bin``: upstream
            0.2.76's default) or ``"sample"`` (each item its own zstd frame).
        compression_batch_size: items per frame with ``"batch"`` (256 by default); giving it
            without a level means ``"batch"``.
        encryption: an :class:`~litdata_format.Encryption` applied per sample or per chunk.
        serializers: extra serializers by key; they are tried before the built-in ones.
        item_loader: the layout of items; ``PyTreeLoader()`` by default, ``TokensLoader()``
            for token streams.
        rank: this writer's number; it names the chunk and rank-index files.
        chunk_index: the number of the first chunk this writer writes (to append after earlier ones).
        arrow_rows: ``False`` stores dicts of JSON-like values as PyTree items too (readable by
            upstream releases before 0.2.76, and compressed by ``compression_level``).
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str],
        chunk_size: int | None = None,
        chunk_bytes: int | str | None = None,
        compression: str | None = None,
        compression_level: str | None = None,
        compression_batch_size: int | None = None,
        encryption: Any = None,
        *,
        serializers: Mapping[str, Serializer] | None = None,
        item_loader: BaseItemLoader | None = None,
        rank: int = 0,
        chunk_index: int = 0,
        arrow_rows: bool = True,
    ) -> None:
        options = check_writer_options(
            chunk_size, chunk_bytes, compression, encryption, item_loader, compression_level, compression_batch_size
        )
        self.output_dir = Path(cache_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.chunk_size, self.chunk_bytes = options.chunk_size, options.chunk_bytes
        self.compression, self.compression_level = options.compression, options.compression_level
        self.frame_rows = options.frame_rows
        self.encryption = encryption
        self._encrypt_sample = encryption.encrypt if encryption is not None and encryption.level == "sample" else None
        self.item_loader = options.item_loader
        self.item_loader.start_writing(resolve_serializers(serializers))
        # Arrow rows: None until the first sample decides, then True or False for good.
        plain = arrow_rows and type(self.item_loader) is PyTreeLoader and encryption is None and not serializers
        self._arrow: bool | None = None if plain and arrow_available() else False
        self._rows_need_pyarrow = plain and not arrow_available()  # records would be Arrow rows with pyarrow
        self._json_fields = False  # PyTree items whose list and dict fields are stored as json leaves
        self._rows_kind: Any = NULL  # the fused kind of the pending rows
        self._rows_leaf = False  # whether a pending row holds a JsonLeaf
        self._row_bytes: int | None = None  # bytes per row of the last Arrow chunk, for chunk_bytes
        # The pending rows' IPC file, built a record batch at a time as the rows come (see _stream_rows).
        self._rows_ipc: RowsIpc | None = None
        self._rows_streaming = True  # False once this chunk's rows came out of order or would not fit Arrow
        self._rows_restarts = 0
        self._rows_retry = 0  # the pending rows' count at which a batch waiting for its padding is tried again
        self.rank = rank
        self._chunk_index = chunk_index
        self._pending: list[tuple[int, Any, int]] = []  # (sample index, item bytes or Arrow row, weight)
        self._pending_bytes = 0
        self._pending_weight = 0
        # Samples given ahead of the run being filled, by index: (item bytes or Arrow row, weight, row scan, size).
        self._waiting: dict[int, tuple[Any, int, RowScan | None, int]] = {}
        self._waiting_load = 0  # their items (chunk_size) or bytes (chunk_bytes)
        self._written_end = 0  # one past the largest index written: a smaller one comes too late
        self._next_index = 0
        self._sampled = False  # whether a sample (here or in the writer resumed) fixed the config
        self.chunks: list[ChunkInfo] = []

    @classmethod
    def from_options(
        cls,
        output_dir: str | os.PathLike[str],
        options: WriterOptions,
        encryption: Any = None,
        rank: int = 0,
        chunk_index: int = 0,
    ) -> BinaryWriter:
        """A writer with options :func:`check_writer_options` already checked (the options of a job's workers).

        Args:
            output_dir: the folder the chunks go to.
            options: the checked options.
            encryption: the :class:`~litdata_format.Encryption` the options were checked with, or None.
            rank: this writer's number; it names its chunk files.
            chunk_index: the number of the first chunk this writer writes.
        """
        return cls(
            output_dir,
            chunk_size=options.chunk_size,
            chunk_bytes=options.chunk_bytes,
            compression=options.compression,
            encryption=encryption,
            item_loader=options.item_loader,
            rank=rank,
            chunk_index=chunk_index,
            compression_level=options.compression_level,
            compression_batch_size=options.frame_rows,
        )

    # -- adding samples -------------------------------------------------------------------------
    def add_item(self, index: int, item: Any) -> str | None:
        """Add sample ``item`` under position ``index``; return the path of a chunk if one was written.

        Samples may arrive out of order, as upstream's writer takes them: the chunk being filled
        takes the indexes in order, and a sample further ahead waits for the indexes before it. So
        with indexes 0, 1, 2, ... the sample given as ``i`` is read back as sample ``i`` whatever
        the order they came in. A missing index is waited for while less than a chunk's worth of
        samples wait (DataLoader workers each get every n-th batch: their indexes never fill the
        gaps); then the chunk goes on past it. At :meth:`done` the samples still waiting are
        written in index order, past the indexes never given.

        Args:
            index: the sample's position in the dataset.
            item: the sample.

        Raises:
            ValueError: ``index`` was given before, or comes after a chunk of later indexes was
                written (it can no longer take its place).
        """
        pending = self._pending
        in_order = bool(pending) and index == pending[-1][0] + 1 and not self._waiting  # the common case
        if not in_order:
            self._check_new_index(index)
        scan = self._scan(item, index) if self._arrow is not False else None
        if self._json_fields and type(item) is dict:
            fields = cast("dict[str, Any]", item)
            item = {k: JsonLeaf(v) if type(v) in (list, dict) else v for k, v in fields.items()}
        data: Any
        if scan is not None:
            data, weight, size = item, 1, scan.size  # a row's size is counted again as it joins a chunk (_place)
        else:
            try:
                data, weight = self.item_loader.encode(item, index)
            except OtherStructureError as err:
                raise self._other_structure(err, item) from None
            if self._encrypt_sample is not None:
                data = self._encrypt_sample(data)
            size = len(data)
        if index >= self._next_index:
            self._next_index = index + 1
        self._sampled = True
        if in_order:
            return self._place(index, data, weight, scan, size)
        self._wait(index, (data, weight, scan, size))
        if pending and index < pending[-1][0]:
            self._unplace()  # its place is inside the chunk being filled: the chunk is filled again, in order
        return self._settle(final=False)

    def _check_new_index(self, index: int) -> None:
        pending = self._pending
        given = index in self._waiting
        if not given and pending and pending[0][0] <= index <= pending[-1][0]:
            at = bisect.bisect_left(pending, index, key=_sample_index)
            given = pending[at][0] == index
        if given:
            raise ValueError(f"The provided index {index} already exists in the cache: sample {index} was given twice")
        if index < self._written_end:
            raise ValueError(
                f"sample {index} came after {self.chunks[-1].filename}, holding samples up to "
                f"{self._written_end - 1}, was written, so it cannot be stored at its place: a sample waits for "
                "the indexes before it while less than a chunk's worth of samples wait; give the indexes in order, "
                "or each less than a chunk's worth of samples late"
            )

    def _wait(self, index: int, entry: tuple[Any, int, RowScan | None, int]) -> None:
        self._waiting[index] = entry
        self._waiting_load += entry[1] if self.chunk_size is not None else entry[3]

    def _settle(self, final: bool) -> str | None:
        """Move the waiting samples that continue the chunk being filled into it, in index order.

        Not ``final``: until a chunk is written (one per sample added, as upstream's writer) or an
        index is missing while less than a chunk's worth of samples wait for it. ``final``: all of
        them, past the missing indexes.
        """
        limit = self.chunk_size if self.chunk_size is not None else self.chunk_bytes or 0
        while self._waiting:
            following = self._pending[-1][0] + 1 if self._pending else min(self._waiting)
            if following not in self._waiting:
                if not final and self._waiting_load < limit:
                    return None
                following = min(self._waiting)  # the missing indexes are not coming soon: go on past them
            entry = self._waiting.pop(following)
            self._waiting_load -= entry[1] if self.chunk_size is not None else entry[3]
            written = self._place(following, *entry)
            if written is not None and not final:
                return written
        return None

    def _place(self, index: int, data: Any, weight: int, scan: RowScan | None, size: int) -> str | None:
        """Append sample ``index`` (the next of the run) to the chunk being filled, writing that chunk first if full."""
        if scan is not None:
            size = scan.size if self._row_bytes is None else self._row_bytes
        written = None
        if self._pending:
            chunk_size, chunk_bytes = self.chunk_size, self.chunk_bytes
            if chunk_size is not None:
                full = self._pending_weight + weight > chunk_size
            else:
                full = (
                    chunk_bytes is not None
                    and header_size(len(self._pending) + 1) + self._pending_bytes + size > chunk_bytes
                )
            if full:
                written = self._flush()
                if scan is not None and self._row_bytes is not None:
                    # The row opens the next chunk: count it as that chunk's other rows are counted, so the
                    # boundaries depend only on what was written before (a resumed writer cuts the same).
                    size = self._row_bytes
        if scan is not None:
            self._rows_kind = fuse_kinds(self._rows_kind, scan.kind)
            self._rows_leaf = self._rows_leaf or scan.has_leaf
        self._pending.append((index, data, weight))
        self._pending_bytes += size
        self._pending_weight += weight
        if scan is not None and self._rows_streaming:
            done = self._rows_ipc.rows if self._rows_ipc is not None else 0
            # A full batch, and a row after it (see RowsIpc).
            if len(self._pending) - done > ROW_BATCH and len(self._pending) >= self._rows_retry:
                self._stream_rows()
        return written

    def _unplace(self) -> None:
        """Send the chunk being filled back to wait, its streamed rows dropped (an index inside it came)."""
        for index, data, weight in self._pending:
            scan = scan_row(data) if self._arrow else None
            self._wait(index, (data, weight, scan, len(data) if scan is None else scan.size))
        if self._rows_ipc is not None:
            self._rows_ipc.abandon()
        self._rows_ipc, self._rows_streaming, self._rows_restarts, self._rows_retry = None, True, 0, 0
        self._rows_kind, self._rows_leaf = NULL, False
        self._pending, self._pending_bytes, self._pending_weight = [], 0, 0

    def __setitem__(self, index: int, item: Any) -> None:
        """``writer[index] = item``, upstream's way of adding a sample: the same as :meth:`add_item`."""
        self.add_item(index, item)

    def _other_structure(self, err: OtherStructureError, item: Any) -> OtherStructureError:
        """``err``, with the extra to install when pyarrow would have stored ``item`` as an Arrow row."""
        if not self._rows_need_pyarrow:
            return err
        try:
            scan_row(item)
        except NotARow:
            return err
        return OtherStructureError(
            f"{err}. Records (dicts of JSON-like values) whose lists vary in length are stored as Arrow rows, "
            'which needs pyarrow: pip install "litdata-format[arrow]"'
        )

    def _scan(self, item: Any, index: int) -> RowScan | None:
        """The sample as an Arrow row, or None when this writer stores PyTree items."""
        try:
            scan = scan_row(item)
        except NotARow as err:
            if self._arrow is None:  # the first sample is not a row: PyTree items, as always
                self._arrow = False
                return None
            raise ValueError(
                f"sample {index}: {err}. The first sample was a dict of JSON-like values, so the samples are "
                "stored as Arrow rows, which hold None, bool, int, float, str, bytes, and lists and dicts "
                "(str keys) of them; convert other values (e.g. arrays with .tolist())"
            ) from None
        if self._arrow is None:
            if _names_a_file(item):
                # A str naming an existing file is a file to store (an image path becomes its pixels), not
                # text: serializers claim it, as in upstream, whose str serializer refuses existing files.
                self._arrow = False
                return None
            if holds_bytes(scan.kind) and find_conflict(scan.kind) is not None:
                # Arrow rows with a field of two kinds fall back to JSON, which cannot hold bytes: store
                # PyTree items, each list or dict field one json leaf (so lists may vary in length), as
                # upstream 0.2.76 does with such a sample.
                self._arrow, self._json_fields = False, True
                return None
            self._choose_rows(index, scan.kind)
        return scan

    def _choose_rows(self, index: int, kind: Any = None) -> None:
        self._arrow = True
        if self.compression is not None or kind is None or not is_flat(kind):
            # Flat rows without compression are written without pyarrow (RowsIpc); other rows need it.
            import_arrow_soon()  # while the samples of the first chunk come in
        # Fixes data_format ["json"] and a one-leaf spec: the layout of a chunk whose rows disagree.
        self.item_loader.encode(JsonLeaf(None), index)

    def write(self, item: Any) -> str | None:
        """Add ``item`` after the last one added.

        Args:
            item: the sample.
        """
        return self.add_item(self._next_index, item)

    def end_chunk(self) -> str | None:
        """Write the samples added since the last chunk as a chunk now, however small; its path, or None.

        The next sample opens a new chunk. A caller that must keep groups of samples in separate
        chunks (to order the chunks later) calls this between groups.
        """
        return self._flush()

    def _flush(self) -> str | None:
        if not self._pending:
            return None
        items = [data for _, data, _ in self._pending]
        weights = [weight for _, _, weight in self._pending]
        whole_file = self.compression_level == "chunk" and not self._arrow
        parts: Sequence[Any]
        if self._arrow:
            parts = self._row_parts()
        elif self.compression is None or whole_file:
            parts = chunk_parts(items)
        elif self.frame_rows is not None:
            parts = pack_batch(items, zstd_level(self.compression), self.frame_rows)
        else:
            parts = pack_sample(items, zstd_level(self.compression))
        size = sum(len(part) for part in parts)
        name = chunk_name(self.rank, self._chunk_index, self.compression if whole_file else None)
        path = os.path.join(self.output_dir, name)  # a str: a Path per chunk costs a few us
        encryption = self.encryption if self.encryption is not None and self.encryption.level == "chunk" else None
        sums: dict[str, str] = {}
        if encryption is None and not whole_file and len(parts) * _GATHER_ITEM_BYTES <= size:
            write_file_atomic(path, parts)  # one gathered write: no copy of the chunk joined in memory
            sums["checksum"] = checksum_bytes(parts)
        else:
            data = b"".join(parts)
            if encryption is not None:
                data = encryption.encrypt(data)
                size = len(data)
            if whole_file and self.compression is not None:
                sums["plain_checksum"] = checksum_bytes([data])  # what a cache keeps, decompressed
                data = compress(data, self.compression)
            write_file_atomic(path, data)
            sums["checksum"] = checksum_bytes([data])
        if self._arrow and parts[-1] == ARROW_ROWS_MAGIC:
            self._row_bytes = max(1, round(size / len(items)))  # chunk_bytes then counts bytes on disk
        self.chunks.append(ChunkInfo(name, size, len(items), self.item_loader.chunk_dim(weights), sums))
        if self.chunk_bytes is not None and len(items) == 1 and header_size(1) + self._pending_bytes > self.chunk_bytes:
            # Only a sample bigger than chunk_bytes is alone in its chunk for that reason (the others start a
            # new chunk); counted as add_item counts it, so an Arrow chunk's schema is not blamed on its row.
            # Upstream's sentence first: code written for upstream filters or expects it.
            warnings.warn(
                f"An item was larger than the target chunk size ({_human_bytes(self.chunk_bytes)}). The current "
                f"chunk will be {_human_bytes(size)} in size: {name} holds sample {self._pending[0][0]} alone; "
                "raise chunk_bytes if that is not what you want",
                UserWarning,
                stacklevel=3,
            )
        self._chunk_index += 1
        self._written_end = max(self._written_end, self._pending[-1][0] + 1)
        self._pending, self._pending_bytes, self._pending_weight = [], 0, 0
        return path

    def _stream_rows(self) -> None:
        """Write the pending rows' full record batches into the chunk's IPC file now, rather than at its end.

        A job of one chunk per worker would otherwise build its whole chunk after its last sample.
        The file is started over when a row widened the rows' kind since it was started (its
        schema comes first). Rows holding lists or dicts, whose fields disagree or that do not fit
        Arrow are left to the chunk's end, where they are built whole, stored as JSON, or the
        error names the sample.
        """
        kind, ipc = self._rows_kind, self._rows_ipc
        try:
            if ipc is None or ipc.kind != kind:
                if ipc is not None:
                    ipc.abandon()
                    self._rows_ipc = None
                    self._rows_restarts += 1
                if not is_flat(kind) or self._rows_restarts > _ROWS_RESTARTS:
                    self._rows_streaming = False
                    return
                ipc = self._rows_ipc = RowsIpc(kind, self.compression)
            while len(self._pending) - ipc.rows > ROW_BATCH:
                end = ipc.rows + ROW_BATCH
                if not ipc.add(self._rows_of(ipc.rows, end), self._following(end), complete=False):
                    # The padding of a str or bytes column waits for more rows: a batch's worth, so
                    # that a column of mostly None costs one try per batch of rows, not one per row.
                    self._rows_retry = len(self._pending) + ROW_BATCH
                    return
        except ArrowUnfit:
            self._rows_streaming = False
            if self._rows_ipc is not None:
                self._rows_ipc.abandon()
                self._rows_ipc = None

    def _rows_of(self, start: int, end: int) -> list[dict[str, Any]]:
        """The pending rows ``start:end`` as Arrow stores them (``JsonLeaf`` unwrapped)."""
        rows = [row for _, row, _ in self._pending[start:end]]
        return [unwrap_leaves(row) for row in rows] if self._rows_leaf else rows

    def _following(self, start: int) -> Callable[[], Iterator[dict[str, Any]]]:
        """The pending rows from ``start`` on, as :meth:`RowsIpc.add` takes them."""

        def rows() -> Iterator[dict[str, Any]]:
            for i in range(start, len(self._pending)):
                row = self._pending[i][1]
                yield unwrap_leaves(row) if self._rows_leaf else row

        return rows

    def _row_parts(self) -> Sequence[Any]:
        """The pending rows as an Arrow rows chunk, or as one ``json`` leaf each when their fields disagree.

        The rows' record batches written while they came in are kept when the rows came in order
        and their kind did not change since. The fallback is a classic chunk, uncompressed so the
        index says the same for every chunk.
        """
        kind, ipc, streamed = self._rows_kind, self._rows_ipc, self._rows_streaming
        conflict = find_conflict(kind)
        try:
            if conflict is None:
                if ipc is not None and streamed and ipc.kind == kind:
                    for start in range(ipc.rows, len(self._pending), ROW_BATCH):
                        end = start + ROW_BATCH
                        ipc.add(self._rows_of(start, end), self._following(end), complete=True)
                    parts = ipc.finish()
                else:
                    if ipc is not None:
                        ipc.abandon()
                    parts = pack_arrow_rows(self._rows_of(0, len(self._pending)), kind, self.compression)
                self._rows_kind, self._rows_leaf = NULL, False
                return parts
        except ArrowUnfit as err:
            conflict = f"pyarrow cannot hold a value ({err})"
            if ipc is not None:
                ipc.abandon()
        finally:
            self._rows_ipc, self._rows_streaming, self._rows_restarts, self._rows_retry = None, True, 0, 0
        rows = self._rows_of(0, len(self._pending))
        self._rows_kind, self._rows_leaf = NULL, False
        items: list[bytes] = []
        for (index, _, _), row in zip(self._pending, rows):
            try:
                items.append(self.item_loader.encode(JsonLeaf(row), index)[0])
            except (ValueError, TypeError) as err:
                raise ValueError(
                    f"sample {index}: a chunk's samples are Arrow rows when each field holds one kind of value "
                    f"(None aside); in this one {conflict}, so its samples are stored as JSON, which cannot "
                    f"hold this sample: {err}"
                ) from None
        return chunk_parts(items)

    # -- resuming -------------------------------------------------------------------------------
    def resume_state(self) -> dict[str, Any]:
        """What a new writer needs, besides :attr:`chunks`, to go on after this one's last chunk as this one would.

        Taken right after a chunk was written, it lets a job that was killed resume with the chunks
        of an uninterrupted run (see :meth:`resume`): what the first sample fixed (Arrow rows or not,
        the structure and each leaf's serializer) and, for ``chunk_bytes``, the bytes per row of the
        last Arrow rows chunk. JSON-serializable.
        """
        return {"arrow_rows": self._arrow, "row_bytes": self._row_bytes, "format": self.item_loader.written_config()}

    def resume(self, chunks: list[ChunkInfo], state: Mapping[str, Any], source: str = "writer state") -> None:
        """Go on after the chunks another writer of this rank wrote, as it would have.

        Call it on a fresh writer (same options, ``chunk_index`` after the last of ``chunks``) before
        adding the samples that follow the last chunk.

        Args:
            chunks: the chunks written so far (they go into this writer's index).
            state: :meth:`resume_state` of the writer that wrote them, taken after its last chunk.
            source: where ``state`` comes from, for errors.

        Raises:
            ValueError: ``state`` is not what :meth:`resume_state` returns, or this writer already has samples.
        """
        if self._pending or self._waiting or self.chunks or self._next_index:
            raise ValueError("BinaryWriter.resume: call it on a fresh writer, before any sample is added")
        arrow, row_bytes = state.get("arrow_rows"), state.get("row_bytes")
        written: Any = state.get("format") or {}
        if (
            arrow not in (None, True, False)
            or not (row_bytes is None or (type(row_bytes) is int and row_bytes > 0))
            or not isinstance(written, Mapping)
        ):
            raise ValueError(f"{source}: not a writer state written by this version of litdata: {dict(state)!r}")
        if arrow and self._arrow is False:
            raise ValueError(
                f"{source}: the interrupted writer stored its samples as Arrow rows, this one cannot (is pyarrow "
                'installed? pip install "litdata-format[arrow]"); resume where the interrupted run ran'
            )
        try:
            self.item_loader.resume_writing(cast("Mapping[str, Any]", written))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{source}: the format the interrupted writer fixed cannot be taken up: {err}") from None
        if arrow:
            self._choose_rows(0)
        elif arrow is False:
            self._arrow = False
        self._row_bytes = row_bytes
        self._sampled = bool(chunks) or len(cast("Mapping[str, Any]", written)) > 0
        self.chunks = list(chunks)

    # -- finishing ------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The ``config`` object of this writer's index."""
        rows = self._arrow is True  # Arrow rows: compression applies to the IPC buffers only
        return {
            "chunk_bytes": self.chunk_bytes,
            "chunk_size": self.chunk_size,
            "compression": None if rows else self.compression,
            "compression_batch_size": None if rows else self.frame_rows,
            "compression_level": None if rows or self.compression_level == "chunk" else self.compression_level,
            "encryption": self.encryption.recorded() if self.encryption is not None else None,
            "ipc_compression": "zstd" if rows and self.compression else None,
            "item_loader": self.item_loader.name,
            "types": None,
            **self.item_loader.written_config(),
        }

    def index_config(self) -> dict[str, Any]:
        """The ``config`` of this writer's index: :meth:`config`, or an empty dataset's before any sample.

        A writer that never saw a sample (here or in the writer it resumed) has the config of an
        empty dataset, as upstream's optimize writes it.
        """
        return self.config() if self._sampled else {"data_format": [], "data_spec": None}

    def finish(self) -> DatasetIndex:
        """Write the last chunks; return this writer's index (its chunks, resumed ones first), writing no file."""
        self._settle(final=True)
        self._flush()
        return DatasetIndex(list(self.chunks), self.index_config(), str(time.time()))

    def done(self) -> list[str]:
        """Write the last chunks and ``{rank}.index.json``; return the chunk paths written."""
        self._settle(final=True)
        self._flush()
        index = DatasetIndex(self.chunks, self.config(), str(time.time()))
        write_json_atomic(self.output_dir / rank_index_name(self.rank), index.to_json())
        return [str(self.output_dir / c.filename) for c in self.chunks]

    def merge(self, num_workers: int = 1, timeout: float = 600.0) -> DatasetIndex:
        """Wait for ``num_workers`` rank index files and merge them (with any existing index).

        Args:
            num_workers: how many writers' rank index files to wait for.
            timeout: seconds to wait for them.
        """
        deadline = time.monotonic() + timeout
        while len(rank_index_files(self.output_dir)) < num_workers:
            if time.monotonic() > deadline:
                found = len(rank_index_files(self.output_dir))
                raise TimeoutError(
                    f"{self.output_dir}: waited {timeout:.0f}s for {num_workers} rank index files, found {found}"
                )
            time.sleep(0.05)
        return complete_dataset(self.output_dir)

    @property
    def index_path(self) -> Path:
        """Where the dataset's merged ``index.json`` is (or will be) written."""
        return self.output_dir / INDEX_FILENAME


def _sample_index(entry: tuple[int, Any, int]) -> int:
    return entry[0]


def _names_a_file(value: Any) -> bool:
    """Whether a str inside a row (a dict of JSON-like values) is the path of an existing media file.

    Upstream's str serializer refuses a str naming an existing file, so another serializer stores
    it: a media one (an image path becomes its pixels) changes what is read back. Any other
    existing file would be pickled as the same str, so such a row stays an Arrow row of text.
    """
    if isinstance(value, str):
        # A long str is text, not worth a stat.
        return len(value) < 4096 and os.path.isfile(value) and _first_claim(value) not in _AS_TEXT
    if isinstance(value, dict):
        return any(_names_a_file(v) for v in cast("dict[str, Any]", value).values())
    if isinstance(value, list):
        return any(_names_a_file(v) for v in cast("list[Any]", value))
    return False


_AS_TEXT = frozenset({None, "str", "text", "bytes", "json", "pickle"})  # serializers that give the str back
_BUILT_IN: dict[str, Serializer] = {}


def _first_claim(path: str) -> str | None:
    """The name of the first built-in serializer (in upstream's order) that takes ``path``."""
    if not _BUILT_IN:
        _BUILT_IN.update(resolve_serializers())
    return next((name for name, serializer in _BUILT_IN.items() if serializer.can_serialize(path)), None)


def _human_bytes(size: int) -> str:
    """``size`` as upstream's writer warning shows it: ``700.0 B``, ``10.0 KB`` (powers of 1000)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"  # not reached: the loop returns at "TB"


@dataclass(frozen=True)
class WriterOptions:
    """A writer's options, checked and with their defaults filled in (:func:`check_writer_options`).

    Attributes:
        chunk_size: the most items per chunk, or None.
        chunk_bytes: the most bytes per chunk, or None (with ``chunk_size``).
        compression: None or a zstd string.
        compression_level: None without compression, else ``"chunk"``, ``"batch"`` or ``"sample"``.
        frame_rows: items per zstd frame with ``"batch"``, else None.
        item_loader: the item loader (``PyTreeLoader()`` when none was given).
    """

    chunk_size: int | None
    chunk_bytes: int | None
    compression: str | None
    compression_level: str | None
    frame_rows: int | None
    item_loader: BaseItemLoader


def check_writer_options(
    chunk_size: object = None,
    chunk_bytes: int | str | None = None,
    compression: str | None = None,
    encryption: Any = None,
    item_loader: object = None,
    compression_level: str | None = None,
    compression_batch_size: int | None = None,
) -> WriterOptions:
    """Check :class:`BinaryWriter`'s options without writing anything (the writer checks its own with it).

    The arguments are :class:`BinaryWriter`'s; ``chunk_size`` and ``item_loader`` may be anything
    (a user's value): their types are checked too.

    Raises:
        ValueError, TypeError: an option is invalid or does not go with another; the message names it.
    """
    if chunk_size is not None and chunk_bytes is not None:
        raise ValueError(
            "give either chunk_size or chunk_bytes, not both (Either one of the `chunk_size` or the `chunk_bytes` "
            "need to be provided)"
        )
    # The compression first, as upstream checks it before it looks at chunk_size's value.
    checked = check_compression(compression)
    level, frame_rows = check_compression_level(checked, compression_level, compression_batch_size)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if item_loader is not None and not isinstance(item_loader, BaseItemLoader):
        raise TypeError(f"item_loader must be an item loader such as TokensLoader(), got {item_loader!r}")
    size_limit = (
        parse_size(chunk_bytes, name="chunk_bytes")
        if chunk_bytes is not None
        else (None if chunk_size is not None else DEFAULT_CHUNK_BYTES)
    )
    if encryption is not None:
        if not isinstance(encryption, Encryption):
            raise ValueError(
                "encryption must be an Encryption (FernetEncryption, RSAEncryption or your subclass of "
                f"litdata.utilities.encryption.Encryption), got {type(encryption).__name__}"
            )
        if encryption.level not in ("sample", "chunk"):
            raise ValueError(f"encryption {encryption!r}: its level must be 'sample' or 'chunk'")
        encryption.recorded()  # a state_dict() the index cannot record fails here, before any chunk
    loader = item_loader if item_loader is not None else PyTreeLoader()
    if level in ("batch", "sample"):
        # Upstream refuses these too, so no reader knows such a chunk encrypted or of tokens.
        if encryption is not None:
            raise ValueError(
                f"compression_level={level!r} cannot be combined with encryption; "
                "use compression_level='chunk' (the whole file is encrypted, then compressed)"
            )
        if type(loader) is not PyTreeLoader:
            raise ValueError(
                f"compression_level={level!r} works with PyTreeLoader samples only, not "
                f"{type(loader).__name__}; use compression_level='chunk'"
            )
    return WriterOptions(chunk_size, size_limit, checked, level, frame_rows, loader)
