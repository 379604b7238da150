r"""Reading upstream 0.2.76's Arrow rows layout: samples kept as an Arrow IPC table at the chunk's end.

When every sample is a dict of JSON-like values (numbers, strings, bools, bytes, None, lists,
nested dicts), upstream 0.2.76 stores the rows as an Arrow IPC file appended to the chunk::

    u32 N | u32 offsets[N+1] | item bytes | Arrow IPC file | u32 ipc_len | b"LDARW01\0"

Every offset equals the header size (earlier writers kept the pytree items too). The table has
one column per key (the union over the chunk's rows, in first-seen order, missing keys null), in
record batches of 256 rows, with Arrow's buffer compression when ``config.ipc_compression`` names
one; the IPC *stream* format of older writers reads too. A sample is the row as ``pyarrow``'s
``to_pylist`` gives it, as upstream's reader returns it. pyarrow is imported on first use.
"""

from __future__ import annotations

import bisect
import struct
from typing import Any

from litdata_format._chunks._chunk import ARROW_ROWS_MAGIC, StoredChunk, header_size
from litdata_format._optional import import_optional
from litdata_format._samples._serializers import Buffer

__all__ = ["ArrowRowsChunk", "is_arrow_rows_chunk"]

_TRAILER = 4 + len(ARROW_ROWS_MAGIC)  # u32 ipc_len + magic
_IPC_FILE_MAGIC = b"ARROW1"


def is_arrow_rows_chunk(data: Buffer) -> bool:
    """Whether ``data`` is an Arrow rows chunk rather than a classic chunk that happens to end in the magic.

    The test is exact: a classic chunk's last offset is its size, while here the offsets
    stop before the Arrow table.
    """
    view = memoryview(data).cast("B")
    size = len(view)
    if size < _TRAILER + 4 or bytes(view[-len(ARROW_ROWS_MAGIC) :]) != ARROW_ROWS_MAGIC:
        return False
    (ipc_len,) = struct.unpack_from("<I", view, size - _TRAILER)
    ipc_start = size - _TRAILER - ipc_len
    (count,) = struct.unpack_from("<I", view, 0)
    if ipc_len == 0 or ipc_start < header_size(count):
        return False
    (last,) = struct.unpack_from("<I", view, header_size(count) - 4)
    return last <= ipc_start


class ArrowRowsChunk(StoredChunk):
    """A chunk whose samples are rows of an Arrow IPC table stored after its items."""

    def __init__(self, data: Buffer, name: str) -> None:
        super().__init__(data, name)
        size = len(self._view)
        if size < _TRAILER + 4 or bytes(self._view[-len(ARROW_ROWS_MAGIC) :]) != ARROW_ROWS_MAGIC:
            raise ValueError(f"chunk {name}: not an Arrow rows chunk (no LDARW01 trailer)")
        (ipc_len,) = struct.unpack_from("<I", self._view, size - _TRAILER)
        ipc_start = size - _TRAILER - ipc_len
        if ipc_len == 0 or ipc_start < 4:
            raise ValueError(
                f"chunk {name}: the Arrow trailer says the table has {ipc_len} bytes, which does not fit the "
                f"{size}-byte file; it is truncated or corrupt"
            )
        self._read_offsets(ipc_start, where=" before its Arrow table")
        self._ipc = self._view[ipc_start : ipc_start + ipc_len]
        self._batches: list[Any] | None = None
        self._starts: list[int] = []
        self._rows: tuple[int, list[Any]] | None = None

    @property
    def has_items(self) -> bool:
        """Whether the chunk also holds pytree item bytes (older writers), not just the table."""
        return self._offsets[-1] > self._offsets[0]

    def _load(self) -> list[Any]:
        batches = self._batches
        if batches is not None:
            return batches
        pa = import_optional("pyarrow", "arrow", f"chunk {self.name} stores its samples as Arrow rows; reading it")
        try:
            source = pa.py_buffer(self._ipc)
            if bytes(self._ipc[: len(_IPC_FILE_MAGIC)]) == _IPC_FILE_MAGIC:
                reader = pa.ipc.open_file(source)
                batches = [reader.get_batch(k) for k in range(reader.num_record_batches)]
            else:
                batches = list(pa.ipc.open_stream(source))
        except (pa.ArrowException, OSError) as err:
            raise ValueError(f"chunk {self.name}: the Arrow rows table cannot be read ({err}); it is corrupt") from None
        starts = [0]
        for batch in batches:
            starts.append(starts[-1] + batch.num_rows)
        if starts[-1] != self._count:
            raise ValueError(
                f"chunk {self.name}: the Arrow table holds {starts[-1]} rows but the header says {self._count}"
            )
        self._starts = starts
        self._batches = batches
        return batches

    def sample(self, index: int) -> Any:
        """Sample ``index`` as upstream returns it: a dict of Python values (one Arrow row)."""
        if not 0 <= index < self._count:
            raise self._out_of_range(index)
        batches = self._load()
        k = bisect.bisect_right(self._starts, index) - 1
        position = index - self._starts[k]
        cached = self._rows
        if cached is None or cached[0] != k:
            cached = (k, batches[k].to_pylist())
            self._rows = cached
        rows = cached[1]
        row = rows[position]
        if row is None:  # handed out already: convert again so no two callers share a mutable dict
            return batches[k].slice(position, 1).to_pylist()[0]
        rows[position] = None
        return row

    def item(self, index: int) -> memoryview:
        """The pytree bytes of item ``index``, for chunks that still hold them."""
        if not self.has_items:
            raise ValueError(
                f"chunk {self.name}: stores its samples only as Arrow rows (no item bytes); read them with sample()"
            )
        return super().item(index)

    def _forget(self) -> None:
        self._batches = None
        self._rows = None
        self._ipc.release()
        super()._forget()
