"""The serializer interface and the scalar, bytes, array and pickle serializers.

Every leaf of a sample is turned into bytes by the first serializer in the registry whose
``can_serialize`` accepts it; its name (plus an optional ``:suffix`` such as a dtype index) is
recorded in ``data_format`` so a reader can pick the same serializer. The encodings are
byte-identical to upstream LitData's (see FORMAT.md).

torch is never imported here at module load: a tensor can only exist if the user imported torch,
so ``can_serialize`` looks it up in ``sys.modules``; decoding a tensor imports it on demand.
"""

from __future__ import annotations

import mmap
import os
import pickle
import struct
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

from litdata_format._samples._json_leaf import JsonLeaf, nested_dumps, nested_loads

__all__ = [
    "BooleanSerializer",
    "BytesSerializer",
    "FloatSerializer",
    "IntegerSerializer",
    "JsonSerializer",
    "NoHeaderNumpySerializer",
    "NoHeaderTensorSerializer",
    "NumpySerializer",
    "PickleSerializer",
    "Serializer",
    "StringSerializer",
    "TensorSerializer",
]

Buffer = bytes | bytearray | memoryview | mmap.mmap

# Index -> numpy dtype, as upstream numbers them. The writer inverts the table.
NUMPY_DTYPES: dict[int, np.dtype] = {
    i: np.dtype(name)
    for i, name in enumerate(
        [
            "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64", "complex64", "complex128", "bool", "object", "bytes", "str", "void",
        ]
    )
}  # fmt: skip
NUMPY_DTYPE_INDEX: dict[np.dtype, int] = {dtype: i for i, dtype in NUMPY_DTYPES.items()}

# Index -> torch dtype attribute name. Aliases share a dtype, so inverting the table makes the
# later index win (float32 -> 1, int64 -> 18), which is what upstream writes.
TORCH_DTYPE_NAMES: dict[int, str] = dict(
    enumerate(
        [
            "float32", "float", "float64", "double", "complex64", "cfloat", "complex128", "cdouble",
            "float16", "half", "bfloat16", "uint8", "int8", "int16", "short", "int32", "int",
            "int64", "long", "bool", "uint16",
        ]
    )
)  # fmt: skip


def torch_module() -> Any:
    """The torch module, imported on demand (only decoders call this)."""
    import torch

    return torch


def torch_if_loaded() -> Any:
    """The torch module if the process already imported it, else None (so checks never import torch)."""
    return sys.modules.get("torch")


def torch_dtype(index: int) -> Any:
    try:
        return getattr(torch_module(), TORCH_DTYPE_NAMES[index])
    except KeyError:
        raise ValueError(f"unknown torch dtype index {index} in the dataset") from None


def torch_dtype_index(dtype: Any) -> int:
    torch = torch_module()
    found = None
    for index, name in TORCH_DTYPE_NAMES.items():
        if getattr(torch, name) == dtype:
            found = index
    if found is None:
        raise ValueError(f"tensors of dtype {dtype} cannot be stored; convert them to a supported dtype")
    return found


def numpy_dtype(index: int) -> np.dtype:
    try:
        return NUMPY_DTYPES[index]
    except KeyError:
        raise ValueError(f"unknown numpy dtype index {index} in the dataset") from None


def numpy_dtype_index(dtype: np.dtype) -> int:
    try:
        return NUMPY_DTYPE_INDEX[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"numpy arrays of dtype {dtype} cannot be stored; convert them to a supported dtype") from None


def suffix_int(data_format: str) -> int:
    """The integer after the colon of a data_format entry such as ``no_header_numpy:9``."""
    _, _, suffix = data_format.partition(":")
    try:
        return int(suffix)
    except ValueError:
        raise ValueError(f"data_format entry {data_format!r} should end with ':<dtype index>'") from None


def check_one_dimensional(ndim: int, data_format: str) -> None:
    """Refuse a leaf that is not 1-D for a format that stores no shape (it would read back flat)."""
    if ndim != 1:
        raise ValueError(
            f"a {ndim}-D array where the first sample had a 1-D one: {data_format} stores 1-D arrays without "
            "their shape (as upstream LitData does), so it would read back flattened. Give this leaf the same "
            "number of dimensions in every sample, or make it at least 2-D in the first sample too (that format "
            "stores every sample's shape)"
        )


class Serializer(ABC):
    """Turns one kind of leaf into bytes and back.

    Subclass it and pass an instance by key (``serializers={"mykind": MySerializer()}``) to the
    writer and the reader: user serializers are tried before the built-in ones, and one with the
    same key as a built-in replaces it.

    Attributes:
        unpickles: True if reading calls ``pickle.loads`` on the stored bytes; readers that
            refuse pickle (``allow_pickle=False``) refuse datasets with such leaves.
    """

    unpickles: bool = False

    @abstractmethod
    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        """Encode ``data``; return the bytes and an optional data_format name (None = the key).

        Args:
            data: the leaf.
        """

    @abstractmethod
    def deserialize(self, data: Buffer) -> Any:
        """Decode bytes written by :meth:`serialize`.

        Args:
            data: the stored bytes: a ``bytes`` for serializers of your own (as upstream gives them), a
                ``memoryview`` of the chunk for the built-in ones, which read it without a copy.
        """

    @abstractmethod
    def can_serialize(self, data: Any) -> bool:
        """Whether this serializer accepts ``data``.

        Args:
            data: a leaf.
        """

    def setup(self, data_format: str) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Receive the full data_format entry (e.g. ``no_header_numpy:9``) before decoding.

        Args:
            data_format: the leaf's entry in ``data_format``.
        """

    def leaf_encoder(self, first: Any, data_format: str) -> Callable[[Any], bytes]:
        """The writer's shortcut for the leaves after ``first`` (stored as ``data_format``).

        The function returns a leaf's bytes, the same as :meth:`serialize`, and raises (any
        exception) for a leaf it cannot take exactly as it took ``first``: another type, or one
        that :meth:`serialize` would name differently. The writer then checks that leaf the slow
        way, which says what is wrong. Override it with something cheaper for a hot kind of leaf.

        Args:
            first: the leaf of the first sample, which :meth:`serialize` stored.
            data_format: the name it was stored under.
        """
        serialize = self.serialize

        def encode(leaf: Any) -> bytes:
            data, name = serialize(leaf)
            if name is not None and name != data_format:
                raise TypeError(name)
            return data if type(data) is bytes else bytes(data)

        sample: object = first  # its type, not its value, is what the encoder checks
        return _typed(type(sample), encode)


def _typed(kind: type, encode: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """``encode`` for leaves of exactly type ``kind``; raises TypeError for any other."""

    def typed(leaf: object) -> bytes:
        if type(leaf) is not kind:
            raise TypeError(type(leaf))
        return encode(leaf)

    return typed


class StringSerializer(Serializer):
    """UTF-8 text; a string naming an existing file is left to the file serializers."""

    def serialize(self, data: str) -> tuple[bytes, str | None]:
        return data.encode("utf-8"), None

    def deserialize(self, data: Buffer) -> str:
        return bytes(data).decode("utf-8")

    def leaf_encoder(self, first: Any, data_format: str) -> Callable[[Any], bytes]:
        return _typed(str, str.encode)  # UTF-8

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, str) and not os.path.isfile(data)


class BooleanSerializer(Serializer):
    """One byte, 0 or 1."""

    def serialize(self, data: bool) -> tuple[bytes, str | None]:
        return (b"\x01" if data else b"\x00"), None

    def deserialize(self, data: Buffer) -> bool:
        return data[0] != 0

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, bool)


class IntegerSerializer(Serializer):
    """int64 little-endian."""

    def serialize(self, data: int) -> tuple[bytes, str | None]:
        try:
            return struct.pack("<q", data), None
        except struct.error:
            raise ValueError(f"the integer {data} does not fit in 64 bits; store it as str or bytes") from None

    def deserialize(self, data: Buffer) -> int:
        return struct.unpack("<q", data)[0]

    def leaf_encoder(self, first: Any, data_format: str) -> Callable[[Any], bytes]:
        return _typed(int, struct.Struct("<q").pack)  # struct.error above 64 bits

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, int) and not isinstance(data, bool)


class FloatSerializer(Serializer):
    """float64 little-endian."""

    def serialize(self, data: float) -> tuple[bytes, str | None]:
        return struct.pack("<d", data), None

    def deserialize(self, data: Buffer) -> float:
        return struct.unpack("<d", data)[0]

    def leaf_encoder(self, first: Any, data_format: str) -> Callable[[Any], bytes]:
        return _typed(float, struct.Struct("<d").pack)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, float)


class BytesSerializer(Serializer):
    """Raw bytes, stored as they are."""

    def serialize(self, data: bytes) -> tuple[bytes, str | None]:
        return data, None

    def deserialize(self, data: Buffer) -> bytes:
        return bytes(data)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, bytes)


class NumpySerializer(Serializer):
    """Arrays of ndim > 1: ``u32 dtype index, u32 ndim, u32 shape[ndim]`` then C-order data."""

    def serialize(self, data: np.ndarray) -> tuple[bytes, str | None]:
        header = struct.pack(f"<II{data.ndim}I", numpy_dtype_index(data.dtype), data.ndim, *data.shape)
        return header + np.ascontiguousarray(data).tobytes(), None

    def deserialize(self, data: Buffer) -> np.ndarray:
        index, ndim = struct.unpack_from("<II", data, 0)
        shape = struct.unpack_from(f"<{ndim}I", data, 8)
        flat = np.frombuffer(data, dtype=numpy_dtype(index), offset=8 + 4 * ndim)
        return flat.reshape(shape).copy()

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, np.ndarray) and data.ndim > 1  # 0-d arrays go to pickle, as upstream


_NO_HEADER_NAMES: dict[np.dtype, str] = {}


class NoHeaderNumpySerializer(Serializer):
    """1-D arrays as raw data; the dtype index travels in the name ``no_header_numpy:{index}``."""

    def __init__(self) -> None:
        self._dtype: np.dtype | None = None

    def setup(self, data_format: str) -> None:
        self._dtype = numpy_dtype(suffix_int(data_format))

    def serialize(self, data: np.ndarray) -> tuple[bytes, str | None]:
        check_one_dimensional(data.ndim, "no_header_numpy")
        name = _NO_HEADER_NAMES.get(data.dtype)
        if name is None:
            name = _NO_HEADER_NAMES[data.dtype] = f"no_header_numpy:{numpy_dtype_index(data.dtype)}"
        return data.tobytes(), name  # tobytes() is C-ordered whatever the array's layout

    def deserialize(self, data: Buffer) -> np.ndarray:
        if self._dtype is None:
            raise RuntimeError("NoHeaderNumpySerializer.setup() must be called with the data_format first")
        return np.frombuffer(data, dtype=self._dtype).copy()

    def leaf_encoder(self, first: Any, data_format: str) -> Callable[[Any], bytes]:
        dtype = first.dtype

        def encode(leaf: Any) -> bytes:  # one call per leaf: this is the hot leaf of most datasets
            if type(leaf) is not np.ndarray or leaf.dtype != dtype or leaf.ndim != 1:
                other: object = leaf
                raise TypeError(type(other))
            return leaf.tobytes()

        return encode

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, np.ndarray) and data.ndim == 1


def _is_tensor(data: Any) -> bool:
    torch = torch_if_loaded()
    return torch is not None and isinstance(data, torch.Tensor)


def _tensor_bytes(tensor: Any) -> bytes:
    tensor = tensor.detach().cpu().contiguous()
    torch = torch_module()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: go through its raw 16-bit pattern
        tensor = tensor.view(torch.int16)
    return tensor.numpy().tobytes()


def _tensor_from(data: Buffer, dtype: Any, shape: tuple[int, ...] | None) -> Any:
    torch = torch_module()
    if len(data) == 0:
        return torch.empty(shape if shape is not None else (0,), dtype=dtype)
    # frombuffer shares memory with the chunk; clone so the sample outlives a closed or evicted chunk.
    flat = torch.frombuffer(bytearray(data), dtype=dtype)
    return flat if shape is None else flat.reshape(shape)


class TensorSerializer(Serializer):
    """Tensors of ndim != 1: big-endian ``>II`` (dtype index, ndim), ``>{ndim}I`` shape, raw data."""

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        header = struct.pack(f">II{data.dim()}I", torch_dtype_index(data.dtype), data.dim(), *data.shape)
        return header + _tensor_bytes(data), None

    def deserialize(self, data: Buffer) -> Any:
        index, ndim = struct.unpack_from(">II", data, 0)
        shape = struct.unpack_from(f">{ndim}I", data, 8)
        return _tensor_from(memoryview(data)[8 + 4 * ndim :], torch_dtype(index), tuple(shape))

    def can_serialize(self, data: Any) -> bool:
        return _is_tensor(data) and data.dim() != 1


class NoHeaderTensorSerializer(Serializer):
    """1-D tensors as raw data; the dtype index travels in the name ``no_header_tensor:{index}``."""

    def __init__(self) -> None:
        self._dtype_index: int | None = None

    def setup(self, data_format: str) -> None:
        self._dtype_index = suffix_int(data_format)

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        check_one_dimensional(data.dim(), "no_header_tensor")
        return _tensor_bytes(data), f"no_header_tensor:{torch_dtype_index(data.dtype)}"

    def deserialize(self, data: Buffer) -> Any:
        if self._dtype_index is None:
            raise RuntimeError("NoHeaderTensorSerializer.setup() must be called with the data_format first")
        return _tensor_from(data, torch_dtype(self._dtype_index), None)

    def can_serialize(self, data: Any) -> bool:
        return _is_tensor(data) and data.dim() == 1


class JsonSerializer(Serializer):
    """A :class:`JsonLeaf` (a list or dict kept as one leaf) in upstream's compact tagged form.

    Plain UTF-8 JSON leaves written by older versions still read (see ``_json_leaf``).
    """

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return nested_dumps(data.value if isinstance(data, JsonLeaf) else data), "json"

    def deserialize(self, data: Buffer) -> Any:
        return nested_loads(data)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, JsonLeaf)


class PickleSerializer(Serializer):
    """Anything else, with pickle. The last resort: it accepts every value."""

    unpickles = True

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return pickle.dumps(data), None

    def deserialize(self, data: Buffer) -> Any:
        return pickle.loads(data)

    def can_serialize(self, data: Any) -> bool:
        return True
