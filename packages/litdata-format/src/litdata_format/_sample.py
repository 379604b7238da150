"""Encode a sample into one item's bytes and back (the PyTree item layout).

An item is ``u32 size[number of leaves]`` followed by each leaf's bytes in flatten order. The
first sample fixes the tree spec and the serializer of every leaf (``data_format``); every later
sample must have the same structure and leaf kinds, or the writer says which sample and which
leaf differ.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from litdata_format._pytree import TreeSpec, flattener, is_node, tree_flatten, unflattener
from litdata_format._registry import serializer_for_format
from litdata_format._serializers import Buffer, Serializer
from litdata_format._trust import ALLOW_PICKLE_ENV, PickleWriteWarning, leaf_paths, unpickles

__all__ = ["SampleDecoder", "SampleEncoder"]


def _describe(value: Any) -> str:
    return type(value).__qualname__


class SampleEncoder:
    """Serializes samples of one dataset; the first sample decides the format."""

    def __init__(self, serializers: Mapping[str, Serializer]) -> None:
        self._serializers = serializers
        self.spec: TreeSpec | None = None
        self.data_format: list[str] = []
        self._leaf_serializers: list[Serializer] = []
        self._leaf_types: list[type] = []
        self._encoders: list[Callable[[Any], bytes]] = []

    def _infer(self, leaves: Sequence[Any], spec: TreeSpec) -> None:
        formats, chosen = [], []
        for position, leaf in enumerate(leaves):
            for name, serializer in self._serializers.items():
                if serializer.can_serialize(leaf):
                    chosen.append(serializer)
                    formats.append(name)
                    break
            else:
                raise TypeError(f"no serializer accepts leaf {position} of type {_describe(leaf)}")
        self.spec, self._leaf_serializers, self.data_format = spec, chosen, formats
        paths = leaf_paths(spec, len(leaves))
        pickled = [
            f"leaf {path} ({_describe(leaf)})" for path, leaf, used in zip(paths, leaves, chosen) if unpickles(used)
        ]
        if pickled:  # once per writer: the first sample fixes every leaf's serializer
            warnings.warn(
                f"{', '.join(pickled)} of each sample will be stored with pickle; readers must allow "
                f"unpickling to read it (allow_pickle=True, the default, or {ALLOW_PICKLE_ENV}=1), and "
                "readers that refuse data which runs code will refuse this dataset. Store such values as "
                "int, float, str, numpy arrays or JSON to avoid it.",
                PickleWriteWarning,
                stacklevel=2,
            )
        self._leaf_types = [type(leaf) for leaf in leaves]
        self._flatten = flattener(spec)
        self._sizes = struct.Struct(f"<{len(leaves)}I")

    def leaves(self, sample: Any, index: int) -> list[bytes]:
        """Each leaf's bytes, after checking ``sample`` against the first sample's format."""
        encoders = self._encoders
        if encoders:
            found = self._flatten(sample)
            if found is not None:
                try:
                    return [encode(leaf) for encode, leaf in zip(encoders, found)]
                except Exception:
                    pass  # a leaf unlike the first sample's: the checked path says what is wrong
        return self._checked_leaves(sample, index)

    def _checked_leaves(self, sample: Any, index: int) -> list[bytes]:
        if self.spec is None:
            leaves, spec = tree_flatten(sample)
            self._infer(leaves, spec)
            out = []
            for position, (leaf, serializer) in enumerate(zip(leaves, self._leaf_serializers)):
                data, name = serializer.serialize(leaf)
                if name is not None:
                    self.data_format[position] = name
                out.append(data if type(data) is bytes else bytes(data))
            # Later samples go through each serializer's shortcut for leaves like these.
            self._encoders = [
                serializer.leaf_encoder(leaf, fmt)
                for leaf, serializer, fmt in zip(leaves, self._leaf_serializers, self.data_format)
            ]
            return out
        found = self._flatten(sample)
        if found is None:
            _, spec = tree_flatten(sample)
            raise ValueError(
                f"sample {index} has a different structure than the first sample: "
                f"{spec.to_json()} vs {self.spec.to_json()}"
            )
        out = []
        for position, (leaf, serializer, expected, fixed) in enumerate(
            zip(found, self._leaf_serializers, self._leaf_types, self.data_format)
        ):
            # Same type as the first sample's leaf: accepted (skips costly checks like isfile).
            if type(leaf) is not expected:
                self._check_leaf(sample, index, position, leaf, serializer)
            data, name = serializer.serialize(leaf)
            if name is not None and name != fixed:
                raise TypeError(
                    f"sample {index}, leaf {position}: encoded as {name!r} but the first sample "
                    f"fixed {fixed!r} (e.g. a different dtype)"
                )
            out.append(data if type(data) is bytes else bytes(data))
        return out

    def _check_leaf(self, sample: Any, index: int, position: int, leaf: Any, serializer: Serializer) -> None:
        """A leaf of another type than the first sample's: it must be a leaf its serializer takes."""
        assert self.spec is not None
        if is_node(leaf):  # a container where the first sample had a leaf (the fast flatten let it by)
            _, spec = tree_flatten(sample)
            raise ValueError(
                f"sample {index} has a different structure than the first sample: "
                f"{spec.to_json()} vs {self.spec.to_json()}"
            )
        if not serializer.can_serialize(leaf):
            raise TypeError(
                f"sample {index}, leaf {position}: a {_describe(leaf)} cannot be stored as "
                f"{self.data_format[position].split(':')[0]!r}, the kind the first sample fixed"
            )

    def encode(self, sample: Any, index: int) -> bytes:
        """The PyTree item bytes of ``sample``: the leaf sizes, then the leaves."""
        leaves = self.leaves(sample, index)
        return b"".join([self._sizes.pack(*map(len, leaves)), *leaves])


class SampleDecoder:
    """Rebuilds samples from PyTree item bytes, given an index's ``data_format`` and ``data_spec``."""

    def __init__(self, data_format: Sequence[str], data_spec: str | TreeSpec, serializers: Mapping[str, Serializer]):
        self.spec = data_spec if isinstance(data_spec, TreeSpec) else TreeSpec.from_json(data_spec)
        if self.spec.num_leaves != len(data_format):
            raise ValueError(
                f"index.json is inconsistent: data_spec has {self.spec.num_leaves} leaves but "
                f"data_format lists {len(data_format)}"
            )
        self._serializers = [serializer_for_format(fmt, serializers) for fmt in data_format]
        self._num = len(self._serializers)
        # Parsing the size header with struct costs ~0.1 us; numpy's frombuffer + sum ~2 us per sample.
        self._header = struct.Struct(f"<{self._num}I")
        self._rebuild = unflattener(self.spec)

    @property
    def serializers(self) -> list[Serializer]:
        """Each leaf's serializer, in flatten order."""
        return self._serializers

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_header"]  # struct.Struct and closures do not pickle (spawned workers pickle us)
        del state["_rebuild"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._header = struct.Struct(f"<{self._num}I")
        self._rebuild = unflattener(self.spec)

    def decode(self, item: Buffer, where: str = "item") -> Any:
        """The sample stored in ``item`` (``where`` names it in errors)."""
        view = memoryview(item)
        header = 4 * self._num
        if len(view) < header:
            raise ValueError(f"{where}: {len(view)} bytes is shorter than its {header}-byte size header")
        sizes = self._header.unpack_from(view)
        end = header + sum(sizes)
        if end > len(view):
            raise ValueError(f"{where}: its leaves need {end} bytes but the item has {len(view)}")
        leaves, start = [], header
        for size, serializer in zip(sizes, self._serializers):
            leaves.append(serializer.deserialize(view[start : start + size]))
            start += size
        return self._rebuild(leaves)
