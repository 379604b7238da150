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

from litdata_format._index._dataset_index import INDEX_FILENAME
from litdata_format._media._wrappers import Graph, JpegArray, MediaRef
from litdata_format._samples._pytree import (
    TreeSpec,
    flattener,
    is_node,
    leaf_paths,
    spec_difference,
    tree_flatten,
    unflattener,
)
from litdata_format._samples._registry import lookup_serializer, serializer_for_format
from litdata_format._samples._serializers import Buffer, Serializer
from litdata_format._samples._trust import ALLOW_PICKLE_ENV, PickleWriteWarning, readable_leaf_paths, unpickles

__all__ = ["OtherStructureError", "SampleDecoder", "SampleEncoder"]


class OtherStructureError(ValueError):
    """A sample whose structure (keys, list and tuple lengths) is not the first sample's."""


class _Unseen:
    """The type of no leaf: a resumed encoder's leaves are all checked until it has seen one sample."""


def _describe(value: Any) -> str:
    return type(value).__qualname__


# Kinds whose reader decodes any of their variants (the image decoder reads the file's own header), so a
# later sample's ``image:png`` may sit under the first sample's ``image:jpg`` (a folder of png and jpg).
_ANY_VARIANT_KINDS = ("image:", "file:")


def _same_kind(name: str, fixed: str) -> bool:
    return name == fixed or any(name.startswith(kind) and fixed.startswith(kind) for kind in _ANY_VARIANT_KINDS)


class SampleEncoder:
    """Serializes samples of one dataset; the first sample decides the format."""

    def __init__(self, serializers: Mapping[str, Serializer]) -> None:
        self._serializers = serializers
        self.spec: TreeSpec | None = None
        self.data_format: list[str] = []
        self._leaf_serializers: list[Serializer] = []
        self._leaf_types: list[type] = []
        self._encoders: list[Callable[[Any], bytes]] = []

    def _leaf(self, position: int) -> str:
        """``leaf 2 (sample['image'])``: a leaf by its number and its place in the sample."""
        assert self.spec is not None
        path = leaf_paths(self.spec)[position]
        return f"leaf {position} (sample{path})" if path else f"leaf {position}"

    def _serialize(self, index: int, position: int, leaf: Any) -> tuple[bytes, str | None]:
        try:
            data, name = self._leaf_serializers[position].serialize(leaf)
        except (ValueError, TypeError, OverflowError) as err:
            raise ValueError(f"sample {index}, {self._leaf(position)}: {err}") from err
        return (data if type(data) is bytes else bytes(data)), name

    def _infer(self, leaves: Sequence[Any], spec: TreeSpec, index: int) -> None:
        try:
            spec.to_json()  # what index.json will hold: refused now if a reader could not rebuild it
        except ValueError as err:
            raise ValueError(f"sample {index}: {err}") from None
        formats: list[str] = []
        chosen: list[Serializer] = []
        # A sample that wraps its media (Image(path=...)) says which leaves are files: its plain strings are
        # text, even one naming an existing file ({"image": Image(path=p), "id": p} keeps "id" a path string).
        text = self._serializers.get("str")
        wrapped = any(isinstance(leaf, (MediaRef, JpegArray, Graph)) for leaf in leaves)
        for position, leaf in enumerate(leaves):
            if wrapped and text is not None and type(leaf) is str:
                chosen.append(text)
                formats.append("str")
                continue
            for name, serializer in self._serializers.items():
                if serializer.can_serialize(leaf):
                    chosen.append(serializer)
                    formats.append(name)
                    break
            else:
                raise TypeError(f"sample {index}: no serializer accepts leaf {position} of type {_describe(leaf)}")
        self.spec, self._leaf_serializers, self.data_format = spec, chosen, formats
        paths = readable_leaf_paths(spec, len(leaves))
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

    def resume(self, data_format: Sequence[str], data_spec: str) -> None:
        """Take the format another encoder's first sample fixed (its ``data_format`` and ``data_spec``).

        A writer that goes on after another one's chunks must store its samples as those chunks are,
        not as its own first sample would decide (e.g. an ``int`` leaf where the first sample's
        ``np.int64`` fixed ``pickle``).

        Raises:
            ValueError: the spec cannot be read, or a serializer it names is not registered here.
        """
        spec = TreeSpec.from_json(data_spec)
        if spec.num_leaves != len(data_format):
            raise ValueError(f"data_spec has {spec.num_leaves} leaves but data_format lists {len(data_format)}")
        chosen: list[Serializer] = []
        for fmt in data_format:
            found = lookup_serializer(fmt, self._serializers)
            if found is None:
                raise ValueError(f"data_format entry {fmt!r} names no serializer registered here")
            chosen.append(found)
        self.spec, self._leaf_serializers, self.data_format = spec, chosen, list(data_format)
        self._leaf_types = [_Unseen] * len(chosen)  # every leaf checked until a sample fixes the shortcuts
        self._encoders = []
        self._flatten = flattener(spec)
        self._sizes = struct.Struct(f"<{len(chosen)}I")

    def leaf_shortcut(self) -> Callable[[Any], bytes] | None:
        """The encoder of the one leaf of a one-leaf format a sample fixed (it raises for another kind of leaf)."""
        return self._encoders[0] if self.spec is not None and len(self._encoders) == 1 else None

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
            self._infer(leaves, spec, index)
            out: list[bytes] = []
            for position, leaf in enumerate(leaves):
                data, name = self._serialize(index, position, leaf)
                if name is not None:
                    self.data_format[position] = name
                out.append(data)
            # Later samples go through each serializer's shortcut for leaves like these.
            self._encoders = [
                serializer.leaf_encoder(leaf, fmt)
                for leaf, serializer, fmt in zip(leaves, self._leaf_serializers, self.data_format)
            ]
            return out
        found = self._flatten(sample)
        if found is None:
            raise self._other_structure(sample, index)
        out: list[bytes] = []
        for position, (leaf, serializer, expected, fixed) in enumerate(
            zip(found, self._leaf_serializers, self._leaf_types, self.data_format)
        ):
            # Same type as the first sample's leaf: accepted (skips costly checks like isfile).
            if type(leaf) is not expected:
                self._check_leaf(sample, index, position, leaf, serializer)
            data, name = self._serialize(index, position, leaf)
            if name is not None and not _same_kind(name, fixed):
                raise TypeError(
                    f"sample {index}, {self._leaf(position)}: encoded as {name!r} but the first sample "
                    f"fixed {fixed!r} (e.g. a different dtype)"
                )
            out.append(data)
        if not self._encoders and out:  # resumed: this sample's leaves give the shortcuts the first one would
            self._leaf_types = [type(leaf) for leaf in found]
            self._encoders = [
                serializer.leaf_encoder(leaf, fmt)
                for leaf, serializer, fmt in zip(found, self._leaf_serializers, self.data_format)
            ]
        return out

    def _other_structure(self, sample: Any, index: int) -> OtherStructureError:
        assert self.spec is not None
        _, spec = tree_flatten(sample)
        return OtherStructureError(
            f"sample {index} has a different structure than the first sample: {spec_difference(spec, self.spec)}. "
            "Every sample must have the first one's structure (the same keys, lists and tuples of the same "
            "lengths); store a field that varies as one value (e.g. a numpy array, or a str)"
        )

    def _check_leaf(self, sample: Any, index: int, position: int, leaf: Any, serializer: Serializer) -> None:
        """A leaf of another type than the first sample's: it must be a leaf its serializer takes."""
        assert self.spec is not None
        if is_node(leaf):  # a container where the first sample had a leaf (the fast flatten let it by)
            raise self._other_structure(sample, index)
        if not serializer.can_serialize(leaf):
            kind = self.data_format[position].split(":")[0]
            raise TypeError(  # ends with upstream's sentence, which code written for upstream matches
                f"sample {index}, {self._leaf(position)}: a {_describe(leaf)} cannot be stored as "
                f"{kind!r}, the kind the first sample fixed. The provided item should be of type {kind!r}"
            )

    def encode(self, sample: Any, index: int) -> bytes:
        """The PyTree item bytes of ``sample``: the leaf sizes, then the leaves."""
        leaves = self.leaves(sample, index)
        return b"".join([self._sizes.pack(*map(len, leaves)), *leaves])


class SampleDecoder:
    """Rebuilds samples from PyTree item bytes, given an index's ``data_format`` and ``data_spec``.

    ``source`` (the index file) names errors in the spec.
    """

    def __init__(
        self,
        data_format: Sequence[str],
        data_spec: str | TreeSpec,
        serializers: Mapping[str, Serializer],
        source: str = INDEX_FILENAME,
    ):
        try:
            self.spec = data_spec if isinstance(data_spec, TreeSpec) else TreeSpec.from_json(data_spec)
        except ValueError as err:
            raise ValueError(f"{source}: config.data_spec: {err}") from None
        if self.spec.num_leaves != len(data_format):
            raise ValueError(
                f"{source} is inconsistent: config.data_spec has {self.spec.num_leaves} leaves but "
                f"config.data_format lists {len(data_format)}"
            )
        self._serializers = [serializer_for_format(fmt, serializers) for fmt in data_format]
        # The user's own serializers get bytes, as upstream gives them (a memoryview has no .decode(), and
        # json.loads refuses one); the built-ins read the memoryview in place, without that copy.
        self._as_bytes = [not type(s).__module__.startswith("litdata_format.") for s in self._serializers]
        self._num = len(self._serializers)
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
        leaves: list[Any] = []
        start = header
        for size, serializer, as_bytes in zip(sizes, self._serializers, self._as_bytes):
            leaf = view[start : start + size]
            leaves.append(serializer.deserialize(bytes(leaf) if as_bytes else leaf))
            start += size
        return self._rebuild(leaves)
