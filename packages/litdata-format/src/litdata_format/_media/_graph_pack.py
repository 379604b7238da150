"""The ``graph`` leaf: a PyG-style graph as packed tensors (the ``LDGR`` layout of upstream 0.2.76).

Layout (integers big-endian)::

    b"LDGR"  u8 version (3)  u16 field_count
    field_count x [ u16 name_len, name (UTF-8), u8 kind, u32 payload_len, payload ]

kind 0 is a tensor in the ``tensor`` serializer's encoding; kind 1 is a pickle. The last field,
``_meta`` (a pickle), holds ``{"_cls": "data"|"hetero", "_tree", "_paths", "_fields"}``: the
nesting of the ``to_dict()`` mapping with every tensor replaced by the marker ``"__ldgr_t__"``,
the key path of each tensor and the field name it was stored under. Versions 1 and 2 (u8
counts, and no kind byte in version 1) still read.

A graph with nothing to pack as tensors (a NetworkX graph, an opaque ``data=``) is pickled
whole instead and named ``graph:pickle``.
"""

from __future__ import annotations

import pickle
import struct
import sys
from typing import Any

import numpy as np

from litdata_format._guards import is_any_dict, is_any_tuple
from litdata_format._media._wrappers import GRAPH_FIELDS, Graph, Tensor, is_pyg_data, read_media_bytes
from litdata_format._samples._serializers import Buffer, TensorSerializer, torch_module

__all__ = ["coerce_tensor", "pack_graph", "unpack_graph"]

MAGIC = b"LDGR"
_VERSION = 3
_KIND_TENSOR, _KIND_PICKLE = 0, 1
_META = "_meta"
_TENSOR_MARK = "__ldgr_t__"
_MAX_U16 = 0xFFFF


def coerce_tensor(value: Any) -> Any:
    """A torch tensor from a tensor, a :class:`Tensor` wrapper, or anything ``torch.as_tensor`` takes."""
    torch = torch_module()
    if isinstance(value, Tensor):
        if value.array is not None:
            tensor = value.array if isinstance(value.array, torch.Tensor) else torch.as_tensor(value.array)
            return tensor if value.dtype is None else tensor.to(value.dtype)
        data, _ = read_media_bytes(value)
        if value.dtype is None:
            raise TypeError("Tensor(path=...) and Tensor(bytes=...) need dtype= to know how to read the bytes")
        return torch.frombuffer(bytearray(data), dtype=value.dtype)
    if isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(value)


def _is_tensor_like(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return isinstance(value, (Tensor, np.ndarray)) or (torch is not None and isinstance(value, torch.Tensor))


def _pyg_kind(value: Any) -> str:
    return "hetero" if type(value).__name__ == "HeteroData" else "data"


def _graph_mapping(item: Any) -> tuple[dict[str, Any], str] | None:
    """The ``to_dict()`` mapping and its kind, or None when there is nothing to pack."""
    if is_pyg_data(item):
        return dict(item.to_dict()), _pyg_kind(item)
    if not isinstance(item, Graph):
        raise TypeError(f"cannot pack a {type(item).__name__} as a graph; pass a PyG Data or a Graph")
    mapping = item.to_mapping()
    if not mapping:
        return None
    if is_pyg_data(item.data):
        return mapping, _pyg_kind(item.data)
    per_type = any(
        is_any_dict(value) and any(_is_tensor_like(child) for child in value.values()) for value in mapping.values()
    )
    return mapping, ("hetero" if per_type else "data")


def _split(node: Any, path: tuple[Any, ...]) -> tuple[dict[tuple[Any, ...], Any], Any] | None:
    """Pull the tensors out of a nested mapping: ``({path: tensor}, skeleton)``; None if unpackable."""
    if _is_tensor_like(node):
        return {path: node}, _TENSOR_MARK
    if is_any_dict(node):
        found: dict[tuple[Any, ...], Any] = {}
        skeleton: dict[Any, Any] = {}
        for key, child in node.items():
            part = _split(child, (*path, key))
            if part is None:
                return None
            found.update(part[0])
            skeleton[key] = part[1]
        return found, skeleton
    if isinstance(node, (list, tuple, set)):
        return None
    return {}, node


def _field_name(path: tuple[Any, ...]) -> str:
    # An edge type key ("paper", "cites", "paper") becomes paper__cites__paper.
    return ".".join("__".join(str(p) for p in key) if is_any_tuple(key) else str(key) for key in path)


def pack_graph(item: Any) -> tuple[bytes, str]:
    """Encode a PyG graph or a :class:`Graph`; returns the bytes and ``graph`` or ``graph:pickle``."""
    mapping = _graph_mapping(item)
    split = _split(mapping[0], ()) if mapping is not None else None
    if mapping is None or split is None or not split[0]:
        opaque = item.data if isinstance(item, Graph) and item.data is not None else item
        return pickle.dumps(opaque), "graph:pickle"
    tensors, skeleton = split
    paths = list(tensors)
    names = [_field_name(path) for path in paths]
    if len(set(names)) != len(names):
        names = [f"t{index}" for index in range(len(paths))]
    meta = {"_cls": mapping[1], "_tree": skeleton, "_paths": paths, "_fields": names}

    encoder = TensorSerializer()
    fields = [
        (name, _KIND_TENSOR, encoder.serialize(coerce_tensor(tensors[path]).cpu().contiguous())[0])
        for name, path in zip(names, paths)
    ]
    fields.append((_META, _KIND_PICKLE, pickle.dumps(meta)))
    if len(fields) > _MAX_U16:
        raise ValueError(f"a graph can hold at most {_MAX_U16 - 1} tensors; this one has {len(fields) - 1}")
    out = [MAGIC, struct.pack(">BH", _VERSION, len(fields))]
    for name, kind, payload in fields:
        encoded = name.encode("utf-8")
        if len(encoded) > _MAX_U16:
            raise ValueError(f"graph field name {name[:40]!r}... is longer than {_MAX_U16} bytes")
        out.append(struct.pack(">H", len(encoded)) + encoded + struct.pack(">BI", kind, len(payload)))
        out.append(payload)
    return b"".join(out), "graph"


def _fill(skeleton: Any, tensors: dict[tuple[Any, ...], Any], path: tuple[Any, ...]) -> Any:
    if skeleton == _TENSOR_MARK:
        return tensors[path]
    if is_any_dict(skeleton):
        return {key: _fill(child, tensors, (*path, key)) for key, child in skeleton.items()}
    return skeleton


def _rebuild(values: dict[str, Any]) -> Any:
    skeleton = values.pop("_tree", None)
    paths = values.pop("_paths", None)
    names = values.pop("_fields", None)
    kind = values.pop("_cls", "data")
    if skeleton is not None and paths is not None and names is not None:
        values = _fill(skeleton, {tuple(path): values[name] for path, name in zip(paths, names)}, ())
    try:
        from torch_geometric.data import Data, HeteroData  # pyright: ignore[reportMissingTypeStubs]  # PyG ships no types
    except ImportError:
        if kind == "hetero":
            return Graph(data=values)
        known = {name: values.pop(name) for name in list(values) if name in GRAPH_FIELDS}
        return Graph(**known, data=values or None)
    return HeteroData.from_dict(values) if kind == "hetero" else Data.from_dict(values)


def unpack_graph(data: Buffer, pickled: bool = False) -> Any:
    """Decode a ``graph`` leaf: a PyG object if torch-geometric is installed, else a :class:`Graph`.

    A pickled graph (``graph:pickle``) comes back as the object that was stored.
    """
    raw = bytes(data)
    if pickled or raw[: len(MAGIC)] != MAGIC:
        return pickle.loads(raw)
    version = raw[len(MAGIC)]
    if version not in (1, 2, 3):
        raise ValueError(f"graph leaf: unsupported LDGR version {version}")
    wide = version >= 3
    pos = len(MAGIC) + 1

    def count() -> int:
        nonlocal pos
        if wide:
            pos += 2
            return struct.unpack_from(">H", raw, pos - 2)[0]
        pos += 1
        return raw[pos - 1]

    decoder = TensorSerializer()
    values: dict[str, Any] = {}
    for _ in range(count()):
        size = count()
        name = raw[pos : pos + size].decode("utf-8")
        pos += size
        kind = _KIND_TENSOR
        if version >= 2:
            kind = raw[pos]
            pos += 1
        (size,) = struct.unpack_from(">I", raw, pos)
        payload = raw[pos + 4 : pos + 4 + size]
        pos += 4 + size
        if kind == _KIND_PICKLE or name == _META:
            values.update(pickle.loads(payload))
        else:
            values[name] = decoder.deserialize(payload)
    return _rebuild(values)
