r"""Writing upstream 0.2.76's Arrow rows chunks (``LDARW01``) from dicts of JSON-like values.

A writer whose first sample is a plain dict of JSON-like values (None, bool, int, float, str,
bytes, lists and dicts of them, ``JsonLeaf``) stores its chunks the way upstream 0.2.76 does::

    u32 N | u32 offsets[N+1], all equal to the header size | Arrow IPC file | u32 ipc_len | b"LDARW01\0"

The IPC file holds one column per key (see :mod:`litdata_format._chunks._arrow_rows`) in record
batches of 256 rows. :func:`scan_row` describes the kind of each value, so rows that disagree (an
int in one sample, a str in another) are known before pyarrow would coerce or refuse them;
:func:`pack_arrow_rows` builds a chunk, and :class:`RowsIpc` builds one of flat rows a record
batch at a time as they come in. pyarrow is imported on first use.
"""

from __future__ import annotations

import contextlib
import importlib.util
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np

from litdata_format._chunks._arrow_ipc import FLAT_TYPES, IpcColumn, PlainIpcFile
from litdata_format._chunks._chunk import ARROW_ROWS_MAGIC, header_size
from litdata_format._chunks._compression import zstd_level
from litdata_format._optional import import_optional
from litdata_format._samples._json_leaf import JsonLeaf

__all__ = [
    "NULL",
    "ROW_BATCH",
    "ArrowUnfit",
    "NotARow",
    "RowScan",
    "RowsIpc",
    "arrow_available",
    "find_conflict",
    "fuse_kinds",
    "holds_bytes",
    "import_arrow_soon",
    "is_flat",
    "pack_arrow_rows",
    "rows_after",
    "scan_row",
    "unwrap_leaves",
]

ROW_BATCH = 256  # rows per record batch, as upstream writes and its reader expects

# A kind is a scalar name, ("list", element kind), ("struct", ((key, kind), ...)) or
# ("conflict", description) when the values seen disagree.
Kind = str | tuple[str, Any]
NULL = "null"
_SCALARS: dict[type, str] = {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes", bytearray: "bytes"}
_ARROW_SPEC: list[bool] = []


class NotARow(ValueError):
    """A sample that is not a dict of JSON-like values (it cannot be an Arrow row)."""


class ArrowUnfit(ValueError):
    """Rows pyarrow cannot hold as they are (e.g. an int beyond 64 bits)."""


def arrow_available() -> bool:
    """Whether pyarrow can be imported (checked once, without importing it)."""
    if not _ARROW_SPEC:
        _ARROW_SPEC.append(importlib.util.find_spec("pyarrow") is not None)
    return _ARROW_SPEC[0]


class RowScan:
    """What :func:`scan_row` found: the row's kind, its payload size and whether it holds a ``JsonLeaf``."""

    __slots__ = ("has_leaf", "kind", "size")

    def __init__(self) -> None:
        self.size = 0
        self.has_leaf = False
        self.kind: Kind = NULL

    def walk(self, value: Any, path: str) -> Kind:
        if value is None:
            return NULL
        kind = _SCALARS.get(value.__class__)
        if kind is not None:
            self.size += len(value) if kind in ("str", "bytes") else 8
            return kind
        if type(value) is list:
            return self._list(cast("list[Any]", value), path)
        if type(value) is dict:
            fields: list[tuple[str, Kind]] = []
            items = cast("dict[Any, Any]", value).items()
            for key, item in items:
                if type(key) is not str:
                    raise NotARow(f"{_where(path)} has the key {key!r}, which is not a str")
                # A scalar field (most of them) is looked up here, without a call and its path text.
                if item is None:
                    fields.append((key, NULL))
                    continue
                kind = _SCALARS.get(item.__class__)
                if kind is None:
                    fields.append((key, self.walk(item, f"{path}[{key!r}]")))
                    continue
                self.size += len(item) if kind in ("str", "bytes") else 8
                fields.append((key, kind))
            return ("struct", tuple(fields))
        if type(value) is JsonLeaf:
            self.has_leaf = True
            return self.walk(value.value, path)
        raise NotARow(f"{_where(path)} is a {type(value).__qualname__}")

    def _list(self, value: list[Any], path: str) -> Kind:
        types: set[type] = {type(item) for item in value}
        if len(types) == 1:
            (only,) = types
            kind = _SCALARS.get(only)
            if kind is not None:  # a list of one scalar type: no walk per element
                self.size += sum(map(len, value)) if kind in ("str", "bytes") else 8 * len(value)
                return ("list", kind)
        kind = NULL
        for position, item in enumerate(value):
            kind = fuse_kinds(kind, self.walk(item, f"{path}[{position}]"), f"{path}[]")
        return ("list", kind)


def _where(path: str) -> str:
    return f"field {path}" if path else "the sample"


def scan_row(sample: Any) -> RowScan:
    """Check that ``sample`` is a non-empty plain dict of JSON-like values and describe it.

    Raises:
        NotARow: it is not (the message says where and what).
    """
    if type(sample) is not dict:
        raise NotARow(f"the sample is a {type(sample).__qualname__}, not a dict")
    if not sample:
        raise NotARow("the sample is an empty dict")
    scan = RowScan()
    scan.kind = scan.walk(sample, "")
    return scan


def _describe(kind: Kind) -> str:
    return kind if isinstance(kind, str) else kind[0]


def fuse_kinds(left: Kind, right: Kind, path: str = "") -> Kind:
    """The kind of a column holding values of both kinds.

    None joins anything, lists join their elements, dicts join their keys; anything else is a
    ``("conflict", description)``.
    """
    if left == right:
        return left
    if left == NULL:
        return right
    if right == NULL:
        return left
    if isinstance(left, tuple) and isinstance(right, tuple) and left[0] == right[0]:
        if left[0] == "conflict":
            return left
        if left[0] == "list":
            return ("list", fuse_kinds(left[1], right[1], f"{path}[]"))
        fields: dict[str, Kind] = dict(left[1])
        for key, kind in right[1]:
            fields[key] = fuse_kinds(fields[key], kind, f"{path}[{key!r}]") if key in fields else kind
        return ("struct", tuple(fields.items()))
    for side in (left, right):
        if isinstance(side, tuple) and side[0] == "conflict":
            return side
    return ("conflict", f"{_where(path)} holds both {_describe(left)} and {_describe(right)} values")


def find_conflict(kind: Kind) -> str | None:
    """The description of the first disagreement inside ``kind``, if any."""
    if isinstance(kind, str):
        return None
    tag, inner = kind
    if tag == "conflict":
        return str(inner)
    if tag == "list":
        return find_conflict(inner)
    for _, field in inner:
        found = find_conflict(field)
        if found is not None:
            return found
    return None


def holds_bytes(kind: Kind) -> bool:
    """Whether a column of ``kind`` holds bytes anywhere inside."""
    if isinstance(kind, str):
        return kind == "bytes"
    tag, inner = kind
    if tag == "conflict":
        return "bytes" in str(inner)
    if tag == "list":
        return holds_bytes(inner)
    return any(holds_bytes(field) for _, field in inner)


def unwrap_leaves(value: Any) -> Any:
    """``value`` with every ``JsonLeaf`` replaced by the value it wraps (what Arrow stores)."""
    if type(value) is JsonLeaf:
        return unwrap_leaves(value.value)
    if type(value) is dict:
        return {key: unwrap_leaves(item) for key, item in cast("dict[Any, Any]", value).items()}
    if type(value) is list:
        return [unwrap_leaves(item) for item in cast("list[Any]", value)]
    return value


def import_arrow_soon() -> None:
    """Start importing pyarrow in a thread, so the first chunk of rows finds it loaded.

    Otherwise a job of one chunk per worker would pay the import after its last sample. A failed
    import is left for that chunk to report.
    """
    if "pyarrow.ipc" in sys.modules:
        return
    threading.Thread(target=_import_quietly, name="litdata-import-pyarrow", daemon=True).start()


def _import_quietly() -> None:
    with contextlib.suppress(Exception):  # RowsIpc imports it again and raises in the writer's thread
        import_optional("pyarrow", "arrow", "writing Arrow rows chunks")


_INT32_MAX = 0x7FFFFFFF
_NUMBERS = {"int": ("int64", "<i8"), "float": ("float64", "<f8")}
# pyarrow writes the data of a slice of a str or bytes column padded to 64 bytes (Arrow's buffer
# alignment) with the bytes after it, where the column has them.
_SLICE_PADDING = 64
# The kinds of a column a record batch is built for from its own rows (see RowsIpc), and their Arrow types.
_FLAT_TYPES = {NULL: "null", "bool": "bool_", "int": "int64", "float": "float64", "str": "string", "bytes": "binary"}


def _fields(kind: Kind) -> list[tuple[str, Kind]]:
    return list(kind[1]) if isinstance(kind, tuple) and kind[0] == "struct" else []


def is_flat(kind: Kind) -> bool:
    """Whether rows of ``kind`` hold only None, bool, int, float, str and bytes values (no list or dict)."""
    fields = _fields(kind)
    return bool(fields) and all(isinstance(field, str) and field in _FLAT_TYPES for _, field in fields)


def _column(pa: Any, values: list[Any], kind: Kind) -> Any:
    """One column of a whole chunk as ``pa.array(values)`` makes it, built from its buffers where that is cheap.

    ``pa.array`` on a Python list imports pandas (when installed), which costs a worker more than
    building a chunk; a column of one scalar kind without None gets the same array (so the same
    IPC bytes) from its buffers, in one copy of its bytes.
    """
    if None in values or not values:
        return pa.array(values)
    if kind in ("bytes", "str"):
        parts = values if kind == "bytes" else [value.encode() for value in values]
        offsets = np.zeros(len(parts) + 1, dtype="<i8")
        np.cumsum([len(part) for part in parts], out=offsets[1:])
        if offsets[-1] <= _INT32_MAX:  # pa.array switches to chunks past 2 GiB: leave that case to it
            buffers = [None, pa.py_buffer(offsets.astype("<i4")), pa.py_buffer(b"".join(parts))]
            return pa.Array.from_buffers(pa.binary() if kind == "bytes" else pa.string(), len(parts), buffers)
    elif kind in _NUMBERS:
        name, dtype = _NUMBERS[kind]
        packed = np.array(values, dtype=dtype)  # an int past 64 bits raises OverflowError, as pa.array does
        return pa.Array.from_buffers(getattr(pa, name)(), len(values), [None, pa.py_buffer(packed)])
    elif kind == "bool":
        bits = np.packbits(np.array(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    return pa.array(values)


class _Parts:
    """A sink for pyarrow's IPC writer that keeps what it is given, in order.

    pyarrow hands a Python sink each body buffer as a ``pyarrow.Buffer`` over the column's own
    memory (no copy), and the small metadata pieces as ``bytes``; the chunk is written from these
    parts with one gathered write, with no copy of it joined in memory.
    """

    __slots__ = ("closed", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


def _options(pa: Any, compression: str | None) -> Any:
    if compression is None:
        return pa.ipc.IpcWriteOptions()
    return pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=zstd_level(compression)))


def _chunk_parts(parts: list[Any], size: int, count: int) -> list[Any]:
    """The chunk around the IPC file of ``size`` bytes in ``parts``: header, the file, its length, the magic."""
    head = struct.pack(f"<{count + 2}I", count, *([header_size(count)] * (count + 1)))
    if len(head) + size > 0xFFFFFFFF:
        raise ValueError(f"an Arrow rows chunk of {size} bytes does not fit 32-bit sizes; lower chunk_bytes")
    return [head, *parts, struct.pack("<I", size), ARROW_ROWS_MAGIC]


Following = Callable[[], Iterator[dict[str, Any]]]


class RowsIpc:
    """An Arrow rows chunk of flat rows (:func:`is_flat`) being built a record batch at a time.

    The bytes are those of upstream 0.2.76's chunk, a table of whole columns cut into batches of
    256 (:func:`pack_arrow_rows`): pyarrow pads a slice of a str or bytes column to 64 bytes with
    the bytes that follow it in the column, so a batch takes those from the rows after it, and
    waits for them. Without ``compression`` (else Arrow's zstd on the buffers) the IPC file is
    written without pyarrow (:mod:`litdata_format._chunks._arrow_ipc`). ``kind`` must be flat.
    """

    def __init__(self, kind: Kind, compression: str | None) -> None:
        self.kind = kind
        self.rows = 0  # rows written so far
        self._fields: list[tuple[str, str]] = [(key, cast("str", field)) for key, field in _fields(kind)]
        self._plain: PlainIpcFile | None = None
        if compression is None:
            self._plain = PlainIpcFile([(key, FLAT_TYPES[field]) for key, field in self._fields])
            return
        pa = import_optional("pyarrow", "arrow", "writing Arrow rows chunks")
        self._pa = pa
        self._types = [getattr(pa, _FLAT_TYPES[field])() for _, field in self._fields]
        self._schema = pa.schema([pa.field(key, arrow) for (key, _), arrow in zip(self._fields, self._types)])
        self._sink = _Parts()
        self._writer: Any = pa.ipc.new_file(self._sink, self._schema, options=_options(pa, compression))

    def add(self, rows: Sequence[dict[str, Any]], following: Following, complete: bool) -> bool:
        """Write ``rows`` (at most ``ROW_BATCH``, leaves unwrapped) as the next record batch.

        ``following()`` gives the rows after them, in order (as many as are known; all of them when
        ``complete``, as the chunk closes).

        Returns:
            False, writing nothing, when a str or bytes column needs padding bytes from rows that
            have not come yet (never when ``complete``).

        Raises:
            ArrowUnfit: pyarrow cannot hold the values (say, an int beyond 64 bits).
        """
        count = len(rows)
        columns: list[IpcColumn] = []
        try:
            for key, field in self._fields:
                values = [row.get(key) for row in rows]
                if field == NULL:
                    columns.append((count, []))  # no buffers: a null column has no validity bitmap either
                    continue
                nulls = [value is None for value in values]
                null_count = sum(nulls)
                validity = np.packbits(np.logical_not(nulls), bitorder="little").tobytes() if null_count else None
                if field in ("bytes", "str"):
                    data = _binary_data(key, field, values, following, complete)
                    if data is None:
                        return False
                    offsets, parts = data
                    columns.append((null_count, [validity, offsets.tobytes(), parts]))
                    continue
                if null_count:
                    zero = False if field == "bool" else 0
                    values = [zero if value is None else value for value in values]
                if field == "bool":
                    packed: Any = np.packbits(np.array(values, dtype=bool), bitorder="little")
                else:  # an int past 64 bits raises OverflowError, as pa.array does
                    packed = np.array(values, dtype=_NUMBERS[field][1])
                columns.append((null_count, [validity, packed.tobytes()]))
        except (OverflowError, ValueError, TypeError) as err:
            raise ArrowUnfit(str(err)) from None
        if self._plain is not None:
            self._plain.write_batch(count, columns)
        else:
            self._write_arrow(count, columns)
        self.rows += count
        return True

    def _write_arrow(self, count: int, columns: list[IpcColumn]) -> None:
        pa = self._pa
        try:
            arrays = [
                pa.nulls(count)
                if field == NULL
                else pa.Array.from_buffers(arrow, count, [_py_buffer(pa, b) for b in buffers], null_count)
                for (_, field), arrow, (null_count, buffers) in zip(self._fields, self._types, columns)
            ]
            batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        except (pa.ArrowException, OverflowError, ValueError, TypeError) as err:
            raise ArrowUnfit(str(err)) from None
        self._writer.write_batch(batch)

    def finish(self) -> list[Any]:
        """The chunk (header, IPC file, its length, the magic) as parts to write in order."""
        if self._plain is not None:
            parts = self._plain.finish()
            return _chunk_parts(parts, self._plain.size, self.rows)
        self._writer.close()
        return _chunk_parts(self._sink.parts, self._sink.size, self.rows)

    def abandon(self) -> None:
        """Drop what was built (the rows' kind changed, or they came out of order)."""
        if self._plain is not None:
            self._plain.parts.clear()
            return
        with contextlib.suppress(Exception):
            self._writer.close()
        self._sink.parts.clear()


def _py_buffer(pa: Any, buffer: Any) -> Any:
    """A column buffer of :data:`IpcColumn` as pyarrow takes it (parts joined)."""
    if buffer is None:
        return None
    return pa.py_buffer(b"".join(cast("list[Any]", buffer)) if type(buffer) is list else buffer)


def _binary_data(
    key: str, field: str, values: list[Any], following: Following, complete: bool
) -> tuple[Any, list[bytes]] | None:
    """The offsets and data of a str or bytes column of a batch, the data padded as pyarrow pads a slice.

    The data is given as its parts in order, not joined: the values themselves (a ``bytearray``
    copied, so a change after the batch is built does not reach it), the padding last. None when
    the padding needs bytes of rows that have not come yet.
    """
    if field == "str":
        parts = [b"" if value is None else value.encode() for value in values]
    else:
        parts = [value if type(value) is bytes else b"" if value is None else bytes(value) for value in values]
    offsets = np.zeros(len(parts) + 1, dtype="<i8")
    np.cumsum([len(part) for part in parts], out=offsets[1:])
    if offsets[-1] > _INT32_MAX:  # 32-bit offsets (pa.array would split such a column into chunks)
        raise ArrowUnfit(f"the {len(parts)} rows of a record batch hold {offsets[-1]} bytes of {key!r}, over 2 GiB")
    need = -int(offsets[-1]) % _SLICE_PADDING
    if need:
        tail = b""
        for row in following():
            value = row.get(key)
            if value is not None:
                tail += (value.encode() if field == "str" else bytes(value[:need]))[: need - len(tail)]
                if len(tail) == need:
                    break
        else:
            if not complete:
                return None
        parts.append(tail)
    return offsets.astype("<i4"), parts


def rows_after(rows: Sequence[dict[str, Any]], start: int) -> Following:
    """What :meth:`RowsIpc.add` takes as ``following``: the rows of ``rows`` from ``start`` on."""

    def following() -> Iterator[dict[str, Any]]:
        return (rows[i] for i in range(start, len(rows)))

    return following


def pack_arrow_rows(rows: Sequence[dict[str, Any]], kind: Kind, compression: str | None) -> list[Any]:
    """An Arrow rows chunk holding ``rows`` (whose fused kind is ``kind``), as parts to write in order.

    The columns are built whole and cut into record batches of 256 rows, as upstream 0.2.76
    does; flat rows go through :class:`RowsIpc`, which writes the same bytes. ``compression``
    (``"zstd"`` or ``"zstd:N"``) compresses the IPC buffers with Arrow's own zstd at that level.

    Raises:
        ArrowUnfit: pyarrow cannot hold the values (say, an int beyond 64 bits).
    """
    if is_flat(kind):
        ipc = RowsIpc(kind, compression)
        for start in range(0, len(rows), ROW_BATCH):
            ipc.add(rows[start : start + ROW_BATCH], rows_after(rows, start + ROW_BATCH), complete=True)
        return ipc.finish()
    pa = import_optional("pyarrow", "arrow", "writing Arrow rows chunks")
    fields = _fields(kind)
    try:
        columns = [_column(pa, [row.get(key) for row in rows], field) for key, field in fields]
        table = pa.Table.from_arrays(columns, names=[key for key, _ in fields])
    except (pa.ArrowException, OverflowError, ValueError, TypeError) as err:
        raise ArrowUnfit(str(err)) from None
    sink = _Parts()
    with pa.ipc.new_file(sink, table.schema, options=_options(pa, compression)) as writer:
        for batch in table.to_batches(max_chunksize=ROW_BATCH):
            writer.write_batch(batch)
    return _chunk_parts(sink.parts, sink.size, len(rows))
