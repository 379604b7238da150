"""Whole batches read as arrays: one gather per leaf instead of one decode per sample.

When every item of a chunk has the same size and the same leaf layout (fixed-size records such
as ``{"index": int, "tokens": int32[128]}``, or blocks of tokens), the chunk's items form a 2-D
byte array and a batch's samples are rows of it: each numeric leaf is one copy of a column of
that array, laid out like the sample. A batch only qualifies when the rows it reads carry exactly
the header bytes of their chunk's first row, so nothing variable is ever read as fixed; otherwise
the caller decodes its samples one by one.
"""

from __future__ import annotations

import itertools
import os
import stat
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from litdata_format._chunks._chunk import ARROW_ROWS_MAGIC, READ_BELOW, Chunk, ChunkView, header_size
from litdata_format._index._dataset_index import ChunkTable
from litdata_format._samples._pytree import TreeSpec
from litdata_format._samples._serializers import (
    BooleanSerializer,
    FloatSerializer,
    IntegerSerializer,
    NoHeaderNumpySerializer,
    NumpySerializer,
    Serializer,
)

__all__ = ["SmallChunkRows", "chunk_rows", "gather_rows"]

_ROWS_KEY = "rows"
_UNKNOWN: Any = object()  # no layout looked for yet (None: the chunk has none)
_LAYOUT_KEY = "pytree-layout"
_FORM = -1  # the key of ``learned`` (row sizes are positive) holding the samples' keys, or None


def chunk_rows(chunk: Chunk) -> np.ndarray | None:
    """The items of ``chunk`` as a read-only ``(items, item_bytes)`` uint8 view, if all have one size.

    ``None`` for chunks whose items differ in size, are decrypted per item, or that are not
    classic chunks. Computed once per opened chunk (from the offsets table: no page is touched).
    """
    if type(chunk) is not ChunkView:
        return None
    views = chunk.views
    if _ROWS_KEY not in views:
        views[_ROWS_KEY] = _rows_of(chunk)
    return views[_ROWS_KEY]


def _rows_of(chunk: ChunkView) -> np.ndarray | None:
    offsets = chunk.offsets
    count = len(offsets) - 1
    if count < 1 or chunk.decrypts:
        return None
    size = offsets[1] - offsets[0]
    if size <= 0 or offsets[-1] - offsets[0] != size * count:
        return None
    if count <= 256:  # a few Python ints cost less than numpy's calls
        if any(b - a != size for a, b in itertools.pairwise(offsets)):
            return None
    elif np.any(np.diff(np.asarray(offsets, dtype=np.int64)) != size):
        return None
    start = header_size(count)
    return np.frombuffer(chunk.raw(), dtype=np.uint8, count=size * count, offset=start).reshape(count, size)


@dataclass(frozen=True)
class _Leaf:
    columns: slice  # the leaf's data bytes inside a row
    dtype: np.dtype
    shape: tuple[int, ...]  # of one sample's value


@dataclass(frozen=True, eq=False)
class _Layout:
    leaves: tuple[_Leaf, ...]
    fixed: np.ndarray  # the byte columns every row must share with the reference row
    reference: np.ndarray  # those bytes in the reference row (uint8)
    runs: tuple[tuple[int, int, bytes], ...]  # the same as runs of columns: (start, stop, the reference's bytes)


_NUMERIC = "biufc"


# Scalars of the built-in serializers and their bytes; arrays carry their own dtype.
_SCALARS: dict[type, np.dtype] = {
    BooleanSerializer: np.dtype(np.bool_),
    IntegerSerializer: np.dtype("<i8"),
    FloatSerializer: np.dtype("<f8"),
}
_ARRAYS = (NoHeaderNumpySerializer, NumpySerializer)


def _numeric(serializer: Serializer) -> bool:
    return type(serializer) in _SCALARS or type(serializer) in _ARRAYS


def gather_rows(
    chunk: Chunk,
    items: np.ndarray,
    spec: TreeSpec,
    serializers: Sequence[Serializer],
    decode_first: Callable[[Chunk], Any],
    learned: dict[int, Any] | None = None,
) -> Any:
    """Items ``items`` of ``chunk`` (PyTree samples) as arrays, or ``None`` when they do not qualify.

    Only one leaf or a flat dict of leaves, each with a built-in numeric serializer, qualifies.
    ``decode_first(chunk)`` decodes the chunk's first item (the layout's reference); ``learned``
    holds the layouts of earlier chunks by row size (kept per dataset), so a chunk whose rows share
    one is gathered without decoding its first item.
    """
    # Whether the samples' form qualifies is the same for every chunk: asked once per dataset.
    if learned is not None and _FORM in learned:
        keys = learned[_FORM]
    else:
        keys = _flat_keys(spec) if all(_numeric(s) for s in serializers) else None
        if learned is not None:
            learned[_FORM] = keys
    if keys is None:
        return None
    rows = chunk_rows(chunk)
    if rows is None or type(chunk) is not ChunkView:
        return None
    # Fancy indexing copies whole rows (np.take would go byte by byte); one copy, then views of it.
    taken = rows[items]
    views = chunk.views
    layout = views.get(_LAYOUT_KEY, _UNKNOWN)
    checked = False
    if layout is _UNKNOWN and learned is not None:
        # Another chunk's layout holds here if every row taken has its fixed bytes (the sizes and
        # numpy headers, which fix the dtypes and shapes): _shares_layout checks exactly that.
        known = learned.get(rows.shape[1])
        if known is not None and _shares_layout(taken, known):
            views[_LAYOUT_KEY] = layout = known
            checked = True
    if layout is _UNKNOWN:
        views[_LAYOUT_KEY] = layout = _layout_of(chunk, keys, serializers, decode_first)
        if learned is not None and layout is not None:
            learned[rows.shape[1]] = layout
    if layout is None or (not checked and not _shares_layout(taken, layout)):
        return None
    return _columns(taken, layout, keys)


def _columns(taken: np.ndarray, layout: _Layout, keys: tuple[Any, ...]) -> Any:
    """The leaves of the rows ``taken`` (checked against ``layout``), one array each, laid out like a sample."""
    count = len(taken)
    columns = [
        np.ascontiguousarray(taken[:, leaf.columns]).view(leaf.dtype).reshape((count, *leaf.shape))
        for leaf in layout.leaves
    ]
    return columns[0] if keys == () else dict(zip(keys, columns))


def _flat_keys(spec: TreeSpec) -> tuple[Any, ...] | None:
    """``()`` for a single leaf, the keys of a flat dict of leaves, else ``None``."""
    if spec.is_leaf():
        return ()
    if spec.type != "builtins.dict" or not all(child.is_leaf() for child in spec.children):
        return None
    return tuple(spec.context)


def _is_array(value: object) -> TypeGuard[np.ndarray]:
    # isinstance alone would leave the array's dtype and shape untyped.
    return isinstance(value, np.ndarray)


def _layout_of(
    chunk: ChunkView, keys: tuple[Any, ...], serializers: Sequence[Serializer], decode_first: Callable[[Chunk], Any]
) -> _Layout | None:
    rows = chunk_rows(chunk)
    if rows is None:
        return None
    row = rows[0]
    count = len(serializers)
    sizes = np.frombuffer(row[: 4 * count].tobytes(), dtype="<u4").tolist()
    sample = decode_first(chunk)
    values = [sample] if keys == () else list(sample.values())
    if len(values) != count:
        return None
    leaves: list[_Leaf] = []
    fixed = [slice(0, 4 * count)]
    start = 4 * count
    for size, value, serializer in zip(sizes, values, serializers):
        scalar = _SCALARS.get(type(serializer))
        array = np.asarray(value, dtype=scalar) if scalar is not None else value
        if not _is_array(array) or array.dtype.kind not in _NUMERIC or array.dtype.byteorder == ">":
            return None
        data = size - array.nbytes
        if data < 0:
            return None
        if data:
            fixed.append(slice(start, start + data))  # the numpy header: dtype and shape
        leaves.append(_Leaf(slice(start + data, start + size), array.dtype, array.shape))
        start += size
    if start != rows.shape[1]:
        return None
    columns = np.concatenate([np.arange(s.start, s.stop) for s in fixed])
    runs = tuple((s.start, s.stop, row[s].tobytes()) for s in fixed)
    return _Layout(tuple(leaves), columns, np.array(row[columns]), runs)


def _shares_layout(taken: np.ndarray, layout: _Layout) -> bool:
    """Whether every row of ``taken`` has ``layout``'s fixed bytes."""
    count, width = taken.shape
    if count <= _FEW_ROWS:  # a few rows of a small chunk: comparing bytes costs less than numpy's calls
        data = taken.tobytes()
        for start in range(0, count * width, width):
            for first, stop, expected in layout.runs:
                if data[start + first : start + stop] != expected:
                    return False
        return True
    return bool((taken[:, layout.fixed] == layout.reference).all())


_FEW_ROWS = 16


# Opening a chunk file to read it whole: FIFOs must not block, links are not followed (see _load).
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


class SmallChunkRows:
    """The rows of small plain chunks, read straight from their files and joined once per batch.

    Many small chunks of fixed-size samples would each cost a chunk object, an offsets table and a
    gather. Here a chunk's file (at most ``READ_BELOW`` bytes) is read whole and its header compared,
    as bytes, with the one every chunk of its item count and row size has (the opener's checks in
    one comparison); :meth:`flush` joins the rows read since into one array, checks them against
    the layout learned for their row size (``learned``, shared with :func:`gather_rows`) and cuts
    the leaves out once for the batch.

    What does not pass exactly is left to the caller, which opens the chunk the usual way (and
    so raises the usual error): :meth:`read` returns False, and :meth:`flush` returns None with
    the pieces read since. ``keys`` are the samples' keys, ``()`` for a sample that is one leaf.
    """

    def __init__(self, folder: str, table: ChunkTable, keys: tuple[Any, ...], learned: dict[int, Any]) -> None:
        self.folder = folder
        self._prefix = os.path.join(folder, "")
        self._table = table
        self._keys = keys
        self._learned = learned
        self._headers: dict[tuple[int, int], bytes] = {}  # the header of a chunk of (items, row size)
        self._rows: list[bytes] = []
        self._size = 0  # the size of the rows read since the last flush
        self._pieces: list[tuple[int, list[int]]] = []
        # The last chunk read: a batch may end inside it and the next one go on from there.
        self._number = -1
        self._data = b""
        self._count = 0
        self._start = 0
        self._row = 0

    @classmethod
    def for_samples(cls, folder: str, table: ChunkTable, spec: TreeSpec, serializers: Sequence[Serializer],
                    learned: dict[int, Any]) -> SmallChunkRows | None:  # fmt: skip
        """A reader of ``table``'s plain chunks (not compressed, encrypted or MDS), or None when not worth one.

        Only samples of a form :func:`gather_rows` gathers qualify, in chunks of at most ``READ_BELOW`` bytes.
        """
        keys = _flat_keys(spec) if all(_numeric(s) for s in serializers) else None
        if keys is None or not len(table) or int(table.chunk_bytes.max()) > READ_BELOW:
            return None
        return cls(folder, table, keys, learned)

    @property
    def pending(self) -> bool:
        """Whether rows were read since the last :meth:`flush`."""
        return bool(self._pieces)

    def read(self, number: int, items: list[int]) -> bool:
        """Read items ``items`` of chunk ``number`` into the batch; False when the caller must open it the usual way."""
        if number != self._number and not self._load(number):
            return False
        row = self._row
        if (self._pieces and row != self._size) or row not in self._learned:
            return False
        if not items or min(items) < 0 or max(items) >= self._count:
            return False
        data, start, rows = self._data, self._start, self._rows
        for item in items:
            at = start + item * row
            rows.append(data[at : at + row])
        self._size = row
        self._pieces.append((number, items))
        return True

    def flush(self) -> tuple[Any, list[tuple[int, list[int]]]]:
        """The rows read since the last flush as arrays laid out like a sample, and the pieces they came from.

        The arrays are None when some row breaks the layout of its size (read those pieces again
        the usual way: each chunk is then gathered, or decoded, on its own).
        """
        rows, pieces, size = self._rows, self._pieces, self._size
        self._rows, self._pieces = [], []
        if not rows:
            return None, pieces
        # A bytearray: the leaves handed out may be views of it, and tensors want writable memory.
        taken = np.frombuffer(bytearray().join(rows), dtype=np.uint8).reshape(len(rows), size)
        layout = self._learned.get(size)
        if layout is None or not _shares_layout(taken, layout):
            return None, pieces
        return _columns(taken, layout, self._keys), pieces

    def _load(self, number: int) -> bool:
        """Read chunk ``number``'s file and check it as the opener would; False when it does not qualify."""
        table = self._table
        name = table.filename(number)
        if "/" in name:  # in a subfolder: the opener checks where the path leads
            return False
        try:
            fd = os.open(self._prefix + name, _FLAGS)
        except OSError:
            return False  # missing, a link, unreadable: the opener says what is wrong
        try:
            info = os.fstat(fd)
            length = info.st_size
            if not stat.S_ISREG(info.st_mode) or not 0 < length <= READ_BELOW:
                return False
            data = os.read(fd, length)
        except OSError:
            return False
        finally:
            os.close(fd)
        count = int(table.chunk_sizes[number])
        head = header_size(count)
        nbytes = int(table.chunk_bytes[number])
        if len(data) != length or count < 1 or (nbytes > 0 and length != nbytes and length != nbytes + head):
            return False
        row, rest = divmod(length - head, count)
        if rest or row <= 0 or data.endswith(ARROW_ROWS_MAGIC):
            return False
        header = self._headers.get((count, row))
        if header is None:
            header = struct.pack(f"<{count + 2}I", count, *range(head, head + row * count + 1, row))
            self._headers[(count, row)] = header
        if not data.startswith(header):
            return False
        self._number, self._data, self._count, self._start, self._row = number, data, count, head, row
        return True
