"""Whole batches read as arrays: one gather per leaf instead of one decode per sample.

When every item of a chunk has the same size and the same leaf layout (fixed-size records such
as ``{"index": int, "tokens": int32[128]}``, or blocks of tokens), the chunk's items form a 2-D
byte array and a batch's samples are rows of it. Each numeric leaf of the batch is then one
``np.take`` of a column of that array: the copy a collate would make anyway, without a Python
object per sample.

The result is a batch of numpy arrays (leading dimension = samples), laid out like the sample
(a dict of leaves, or one leaf), or ``None`` when the batch does not qualify; the caller then
decodes its samples one by one. A batch only qualifies when the rows it reads carry exactly
the header bytes of their chunk's first row, so nothing variable is ever read as fixed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from litdata_format._chunk import Chunk, ChunkView, header_size
from litdata_format._pytree import TreeSpec
from litdata_format._serializers import (
    BooleanSerializer,
    FloatSerializer,
    IntegerSerializer,
    NoHeaderNumpySerializer,
    NumpySerializer,
    Serializer,
)

__all__ = ["chunk_rows", "gather_rows"]

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

    Args:
        chunk: an opened chunk.
        items: positions inside it, in batch order.
        spec: the samples' tree spec; only one leaf or a flat dict of leaves qualifies.
        serializers: each leaf's serializer; only the built-in numeric ones qualify (a user's own
            serializer decides its own decoding).
        decode_first: ``decode_first(chunk)`` decodes the chunk's first item (the layout's
            reference).
        learned: layouts found in earlier chunks, by row size (the caller keeps it per dataset):
            a chunk whose rows share one is gathered without decoding its first item.
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
    count = len(items)
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
