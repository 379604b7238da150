"""The ``json`` leaf: a list or dict kept as ONE pytree leaf, in a compact tagged binary form.

Upstream LitData 0.2.76 wraps variable-length JSON values (conversation turns, answer lists)
in ``JsonLeaf`` so the pytree, and so ``data_format``, does not change from sample to sample.
The value is written with a one-byte tag:

====  ==========  ===========================================================
tag   name        payload after the tag (integers little-endian)
====  ==========  ===========================================================
0     json        ``u32 n`` + n bytes of UTF-8 JSON (anything else)
1     str list    ``u32 count``, then per string ``u32 n`` + UTF-8 (also [])
2     int list    ``u32 count`` + count x int64
3     float list  ``u32 count`` + count x float64
4     bool list   ``u32 count`` + count bytes 0/1
5     dict        ``u32 count``, then per entry ``u32 n`` + UTF-8 key, tagged value
6     records     ``u32 rows, u32 keys``, the keys as ``u32 n`` + UTF-8, then per row
                  and key a cell: 0x10 None, 0x11 str (u32 n + UTF-8),
                  0x12 int64, 0x13 float64, 0x14 bool (1 byte)
7     str         ``u32 n`` + UTF-8
8     int         int64
9     float       float64
10    bool        one byte 0/1
11    None        nothing
====  ==========  ===========================================================

Older writers stored plain UTF-8 JSON, whose first byte is above 0x20; that still reads.
"""

from __future__ import annotations

import json
import mmap
import struct
from typing import Any

from litdata_format._guards import is_any_dict, is_any_list

__all__ = ["JsonLeaf", "nested_dumps", "nested_loads"]

_JSON, _STRS, _INTS, _FLOATS, _BOOLS, _DICT, _RECORDS, _STR, _INT, _FLOAT, _BOOL, _NONE = range(12)
_CELL_NONE, _CELL_STR, _CELL_INT, _CELL_FLOAT, _CELL_BOOL = range(0x10, 0x15)
_LAST_TAG = 0x20  # a first byte above this is the start of plain JSON text
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class JsonLeaf:
    """Wraps a JSON-like list or dict so the pytree keeps it as a single ``json`` leaf."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"JsonLeaf({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonLeaf) and other.value == self.value

    __hash__ = None  # type: ignore[assignment]  # mutable payload


def _is_int64(value: Any) -> bool:
    return type(value) is not bool and isinstance(value, int) and _INT64_MIN <= value <= _INT64_MAX


def _tagged(tag: int, count: int) -> bytes:
    return struct.pack("<BI", tag, count)


def _text(value: str) -> bytes:
    raw = value.encode("utf-8")
    return struct.pack("<I", len(raw)) + raw


def _as_json(value: Any) -> bytes:
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return _tagged(_JSON, len(raw)) + raw


def _records(rows: list[dict[str, Any]]) -> bytes | None:
    """Rows sharing one set of string keys and holding only scalars; None if they do not."""
    keys = list(rows[0])
    # The rows are users' values: the string keys are what this checks.
    if not keys or not all(isinstance(key, str) for key in keys):  # pyright: ignore[reportUnnecessaryIsInstance]
        return None
    wanted = set(keys)
    out = [_tagged(_RECORDS, len(rows)), struct.pack("<I", len(keys)), *(_text(key) for key in keys)]
    for row in rows:
        if set(row) != wanted:
            return None
        for key in keys:
            cell = row[key]
            if cell is None:
                out.append(bytes([_CELL_NONE]))
            elif isinstance(cell, bool):
                out.append(bytes([_CELL_BOOL, int(cell)]))
            elif isinstance(cell, str):
                out.append(bytes([_CELL_STR]) + _text(cell))
            elif _is_int64(cell):
                out.append(bytes([_CELL_INT]) + struct.pack("<q", cell))
            elif isinstance(cell, float):
                out.append(bytes([_CELL_FLOAT]) + struct.pack("<d", cell))
            else:
                return None
    return b"".join(out)


def _list(items: list[Any]) -> bytes:
    if not items:
        return _tagged(_STRS, 0)
    if all(isinstance(item, str) for item in items):
        return _tagged(_STRS, len(items)) + b"".join(_text(item) for item in items)
    if all(isinstance(item, bool) for item in items):
        return _tagged(_BOOLS, len(items)) + bytes(int(item) for item in items)
    if all(_is_int64(item) for item in items):
        return _tagged(_INTS, len(items)) + struct.pack(f"<{len(items)}q", *items)
    if all(isinstance(item, float) for item in items):
        return _tagged(_FLOATS, len(items)) + struct.pack(f"<{len(items)}d", *items)
    if all(isinstance(item, dict) for item in items):
        encoded = _records(items)
        if encoded is not None:
            return encoded
    return _as_json(items)


def nested_dumps(value: Any) -> bytes:
    """Encode a JSON-like value in the tagged form (byte-identical to upstream 0.2.76)."""
    if value is None:
        return bytes([_NONE])
    if isinstance(value, bool):
        return bytes([_BOOL, int(value)])
    if isinstance(value, str):
        return bytes([_STR]) + _text(value)
    if _is_int64(value):
        return bytes([_INT]) + struct.pack("<q", value)
    if isinstance(value, float):
        return bytes([_FLOAT]) + struct.pack("<d", value)
    if is_any_dict(value):
        if not all(isinstance(key, str) for key in value):
            return _as_json(value)
        parts = [_tagged(_DICT, len(value))]
        for key, item in value.items():
            parts.append(_text(key))
            parts.append(nested_dumps(item))
        return b"".join(parts)
    if is_any_list(value):
        return _list(value)
    return _as_json(value)


class _Cursor:
    """Reads the tagged form front to back."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.pos = 0

    def u8(self) -> int:
        return self.take(1)[0]

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        try:
            values = struct.unpack_from(fmt, self.raw, self.pos)
        except struct.error:
            raise ValueError("json leaf: the encoded value is truncated") from None
        self.pos += struct.calcsize(fmt)
        return values

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.raw):
            raise ValueError("json leaf: the encoded value is truncated")
        self.pos += size
        return self.raw[self.pos - size : self.pos]

    def text(self) -> str:
        (size,) = self.unpack("<I")
        return self.take(size).decode("utf-8")

    def cell(self) -> Any:
        kind = self.u8()
        if kind == _CELL_NONE:
            return None
        if kind == _CELL_STR:
            return self.text()
        if kind == _CELL_INT:
            return self.unpack("<q")[0]
        if kind == _CELL_FLOAT:
            return self.unpack("<d")[0]
        if kind == _CELL_BOOL:
            return self.u8() != 0
        raise ValueError(f"json leaf: unknown record cell tag {kind:#x}")

    def value(self) -> Any:
        tag = self.u8()
        if tag == _NONE:
            return None
        if tag == _BOOL:
            return self.u8() != 0
        if tag == _STR:
            return self.text()
        if tag == _INT:
            return self.unpack("<q")[0]
        if tag == _FLOAT:
            return self.unpack("<d")[0]
        (count,) = self.unpack("<I")
        if tag == _JSON:
            return json.loads(self.take(count))
        if tag == _STRS:
            return [self.text() for _ in range(count)]
        if tag == _INTS:
            return list(self.unpack(f"<{count}q"))
        if tag == _FLOATS:
            return list(self.unpack(f"<{count}d"))
        if tag == _BOOLS:
            return [byte != 0 for byte in self.take(count)]
        if tag == _DICT:
            out: dict[str, Any] = {}
            for _ in range(count):
                key = self.text()
                out[key] = self.value()
            return out
        if tag == _RECORDS:
            (n_keys,) = self.unpack("<I")
            keys = [self.text() for _ in range(n_keys)]
            return [{key: self.cell() for key in keys} for _ in range(count)]
        raise ValueError(f"json leaf: unknown tag {tag}")


def nested_loads(data: bytes | bytearray | memoryview | mmap.mmap) -> Any:
    """Decode a ``json`` leaf in the tagged form or in the older plain-JSON form."""
    raw = bytes(data)
    if not raw or raw[0] > _LAST_TAG:
        return json.loads(raw)
    try:
        return _Cursor(raw).value()
    except ValueError:
        # A first byte that is no known tag (JSON text led by whitespace): read it as JSON.
        if raw[0] <= _NONE:
            raise
        return json.loads(raw)
