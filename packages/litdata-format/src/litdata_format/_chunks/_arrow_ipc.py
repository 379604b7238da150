r"""The Arrow IPC file of flat record batches, written without pyarrow: the bytes pyarrow writes.

An optimize worker whose samples are dicts of scalars (``{"image": bytes, "label": int}``) writes
its chunks as Arrow rows (see :mod:`litdata_format._chunks._arrow_write`); importing pyarrow would
cost each worker more CPU than a small job's work. For columns of null, bool, int64, float64,
binary and utf8 values without compression the file is small and fixed in shape, so it is
written here directly:

    b"ARROW1\0\0" | schema message | record batch messages (metadata + body) | EOS | footer | u32 len | b"ARROW1"

Each message is a flatbuffer, built as the flatbuffers C++ builder that Arrow uses builds it
(back to front, fields in the order Arrow's generated code adds them, default values left out,
vtables shared), so the file is byte for byte the one ``pyarrow.ipc.new_file`` writes for the
same buffers; ``packages/litdata-format/tests/test_write_arrow_rows.py`` compares the two.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, cast

__all__ = ["FLAT_TYPES", "IpcColumn", "PlainIpcFile"]

# The kinds of column written here, and their Arrow type (the flatbuffer union member).
_NULL, _INT, _FLOAT, _BINARY, _UTF8, _BOOL = 1, 2, 3, 4, 5, 6
FLAT_TYPES = {"null": _NULL, "bool": _BOOL, "int": _INT, "float": _FLOAT, "str": _UTF8, "bytes": _BINARY}
_V5 = 4  # MetadataVersion.V5
_SCHEMA, _RECORD_BATCH = 1, 3  # MessageHeader
_DOUBLE = 2  # Precision.DOUBLE
_MAGIC = b"ARROW1"
_CONTINUATION = b"\xff\xff\xff\xff"
_ZEROS = bytes(64)

#: One column of a record batch: its null count and its body buffers (None: an absent validity bitmap;
#: a list: a buffer given as its parts, in order).
IpcColumn = tuple[int, list[Any]]


class _Builder:
    """What Arrow uses of flatbuffers' C++ ``FlatBufferBuilder``, with the same bytes.

    The buffer grows towards its front; an object's offset is the buffer's size just after it was
    written (counted from the end). The pieces are kept in the order written and joined reversed
    once, at :meth:`finish`: prepending each to one buffer would copy the buffer every time.
    """

    __slots__ = ("_fields", "_minalign", "_parts", "_size", "_vtables")

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # back to front
        self._size = 0
        self._minalign = 1
        self._vtables: dict[bytes, int] = {}  # each vtable written, by its bytes: its offset
        self._fields: list[tuple[int, int]] = []

    def _prepend(self, data: bytes) -> None:
        self._parts.append(data)
        self._size += len(data)

    def _track(self, alignment: int) -> None:
        self._minalign = max(self._minalign, alignment)

    def _align(self, size: int) -> None:
        self._track(size)
        padding = -self._size % size
        if padding:
            self._prepend(_ZEROS[:padding])

    def _prealign(self, length: int, alignment: int) -> None:
        if length == 0:
            return
        self._track(alignment)
        padding = -(self._size + length) % alignment
        if padding:
            self._prepend(_ZEROS[:padding])

    def _push(self, fmt: str, value: int) -> int:
        self._align(struct.calcsize(fmt))
        self._prepend(struct.pack("<" + fmt, value))
        return self._size

    def _refer(self, offset: int) -> int:
        self._align(4)
        return self._size - offset + 4

    def start(self) -> None:
        """Start a table."""
        self._fields = []

    def add(self, slot: int, fmt: str, value: int, default: int = 0) -> None:
        """Add a scalar field (left out when it is the default)."""
        if value != default:
            self._fields.append((4 + 2 * slot, self._push(fmt, value)))

    def add_offset(self, slot: int, offset: int) -> None:
        """Add a field that refers to an object built before (a table, a vector, a string)."""
        if offset:
            self._fields.append((4 + 2 * slot, self._push("I", self._refer(offset))))

    def end(self, start: int) -> int:
        """End the table started at size ``start``; its offset.

        The table starts with the offset of its vtable, known before it is written: the vtable
        is either one written before with the same bytes (shared), or written right in front.
        """
        self._align(4)
        loc = self._size + 4  # the table's offset once its vtable offset is written
        size = max(max((slot for slot, _ in self._fields), default=0) + 2, 4)
        vtable = bytearray(size)
        struct.pack_into("<HH", vtable, 0, size, loc - start)
        for slot, offset in self._fields:
            struct.pack_into("<H", vtable, slot, loc - offset)
        self._fields = []
        key = bytes(vtable)
        used = self._vtables.get(key)
        if used is None:
            used = self._vtables[key] = loc + size
            self._prepend(struct.pack("<i", used - loc))
            self._prepend(key)
        else:
            self._prepend(struct.pack("<i", used - loc))
        return loc

    @property
    def size(self) -> int:
        return self._size

    def string(self, text: bytes) -> int:
        self._prealign(len(text) + 1, 4)
        self._prepend(text + b"\0")
        return self._push("I", len(text))

    def offsets(self, offsets: Sequence[int]) -> int:
        """A vector of offsets (of tables built before)."""
        self._prealign(4 * len(offsets), 4)
        for offset in reversed(offsets):
            self._push("I", self._refer(offset))
        return self._push("I", len(offsets))

    def structs(self, packed: bytes, count: int, alignment: int) -> int:
        """A vector of ``count`` structs, ``packed`` in order."""
        self._prealign(len(packed), 4)
        self._prealign(len(packed), alignment)
        if packed:
            self._prepend(packed)
        return self._push("I", count)

    def finish(self, root: int) -> bytes:
        self._prealign(4, self._minalign)
        self._push("I", self._refer(root))
        return b"".join(reversed(self._parts))


def _schema(b: _Builder, fields: Sequence[tuple[str, int]]) -> int:
    """Arrow's ``SchemaToFlatbuffer`` for nullable flat fields and no metadata."""
    made: list[int] = []
    for name, arrow in fields:
        start = b.size
        b.start()
        if arrow == _INT:
            b.add(0, "i", 64)  # bitWidth
            b.add(1, "B", 1)  # is_signed
        elif arrow == _FLOAT:
            b.add(0, "h", _DOUBLE)
        type_offset = b.end(start)
        fb_name = b.string(name.encode())
        children = b.offsets([])
        start = b.size
        b.start()
        b.add_offset(5, children)
        b.add_offset(3, type_offset)
        b.add_offset(0, fb_name)
        b.add(2, "B", arrow)  # type_type
        b.add(1, "B", 1)  # nullable
        made.append(b.end(start))
    vector = b.offsets(made)
    start = b.size
    b.start()
    b.add_offset(1, vector)  # endianness Little is the default: left out
    return b.end(start)


def _message(b: _Builder, header_type: int, header: int, body_length: int) -> bytes:
    start = b.size
    b.start()
    b.add(3, "q", body_length)
    b.add_offset(2, header)
    b.add(0, "h", _V5)
    b.add(1, "B", header_type)
    return b.finish(b.end(start))


def _pad8(size: int) -> int:
    return -size % 8


class PlainIpcFile:
    """An Arrow IPC file of flat columns being written a record batch at a time, as parts.

    Args:
        fields: each column's name and Arrow type (a value of :data:`FLAT_TYPES`).
    """

    def __init__(self, fields: Sequence[tuple[str, int]]) -> None:
        self._fields = list(fields)
        self._blocks: list[tuple[int, int, int]] = []
        b = _Builder()
        schema = _message(b, _SCHEMA, _schema(b, self._fields), 0)
        self.parts: list[Any] = [_MAGIC + b"\0\0"]
        self.size = 8
        self._encapsulate(schema)

    def _encapsulate(self, metadata: bytes) -> int:
        padded = len(metadata) + 8 + _pad8(len(metadata) + 8)
        self.parts += [_CONTINUATION + struct.pack("<i", padded - 8), metadata, _ZEROS[: padded - 8 - len(metadata)]]
        self.size += padded
        return padded

    def write_batch(self, count: int, columns: Sequence[IpcColumn]) -> None:
        """Write a record batch of ``count`` rows: each column's null count and body buffers."""
        nodes: list[bytes] = []
        buffers: list[bytes] = []
        body: list[Any] = []
        offset = 0
        for null_count, column in columns:
            nodes.append(struct.pack("<qq", count, null_count))
            for buffer in column:
                if buffer is None:
                    length = 0
                elif type(buffer) is list:  # a buffer given as its parts: written as they are, not joined
                    parts = cast("list[Any]", buffer)
                    length = sum(map(len, parts))
                    body += parts
                else:
                    length = len(buffer)
                    body.append(buffer)
                buffers.append(struct.pack("<qq", offset, length))
                if length:
                    padding = _pad8(length)
                    if padding:
                        body.append(_ZEROS[:padding])
                    offset += length + padding
        b = _Builder()
        fb_nodes = b.structs(b"".join(nodes), len(nodes), 8)
        fb_buffers = b.structs(b"".join(buffers), len(buffers), 8)
        start = b.size
        b.start()
        b.add(0, "q", count)
        b.add_offset(2, fb_buffers)
        b.add_offset(1, fb_nodes)
        position = self.size
        metadata = self._encapsulate(_message(b, _RECORD_BATCH, b.end(start), offset))
        self.parts += body
        self.size += offset
        self._blocks.append((position, metadata, offset))

    def finish(self) -> list[Any]:
        """End the file (end-of-stream marker, footer); all its parts, in order."""
        b = _Builder()
        schema = _schema(b, self._fields)
        dictionaries = b.structs(b"", 0, 8)
        blocks = b"".join(struct.pack("<qi4xq", *block) for block in self._blocks)
        batches = b.structs(blocks, len(self._blocks), 8)
        start = b.size
        b.start()
        b.add_offset(3, batches)
        b.add_offset(2, dictionaries)
        b.add_offset(1, schema)
        b.add(0, "h", _V5)
        footer = b.finish(b.end(start))
        self.parts += [_CONTINUATION + b"\0\0\0\0", footer, struct.pack("<i", len(footer)), _MAGIC]
        self.size += 8 + len(footer) + 4 + len(_MAGIC)
        return self.parts
