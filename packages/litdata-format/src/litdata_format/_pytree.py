"""A small pytree: flatten samples into leaves and back, without torch.

The tree spec serializes to the JSON string that ``torch.utils._pytree.treespec_dumps`` writes
(protocol 1), because upstream LitData stores exactly that string in ``index.json`` as
``data_spec``. Containers follow torch's rules: only the exact types dict, list, tuple,
OrderedDict, defaultdict and namedtuples are nodes; everything else (None included) is a leaf.
Dict children are taken in insertion order.
"""

from __future__ import annotations

import builtins
import collections
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LEAF", "TreeSpec", "flatten_like", "unflattener", "register_namedtuple", "tree_flatten", "tree_unflatten"]

# namedtuple classes known under a serialized name (as torch's ``_register_namedtuple`` does).
_NAMED_BY_NAME: dict[str, type] = {}
_NAME_BY_NAMED: dict[type, str] = {}


def register_namedtuple(cls: type, serialized_type_name: str) -> None:
    """Record ``cls`` under ``serialized_type_name`` in data_spec (both when writing and reading).

    Without it a namedtuple is written under its ``module.QualName`` and must be importable
    by that name to be read back.
    """
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        raise TypeError(f"register_namedtuple expects a namedtuple class, got {cls!r}")
    _NAMED_BY_NAME[serialized_type_name] = cls
    _NAME_BY_NAMED[cls] = serialized_type_name


_PROTOCOL = 1
_DICT, _LIST, _TUPLE = "builtins.dict", "builtins.list", "builtins.tuple"
_ORDERED, _DEFAULT, _NAMED = "collections.OrderedDict", "collections.defaultdict", "collections.namedtuple"


@dataclass(frozen=True)
class TreeSpec:
    """The shape of a sample: a node type, its context (dict keys, namedtuple class) and children.

    ``type`` is None for a leaf. ``context`` holds the list of keys for dict-like nodes, the
    dotted class name for a namedtuple and a dict describing the factory for a defaultdict.
    """

    type: str | None
    context: Any = None
    children: tuple[TreeSpec, ...] = ()
    num_leaves: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        count = 1 if self.type is None else sum(c.num_leaves for c in self.children)
        object.__setattr__(self, "num_leaves", count)

    def is_leaf(self) -> bool:
        return self.type is None

    def to_json(self) -> str:
        """The spec as torch's ``treespec_dumps`` protocol-1 string."""
        return json.dumps([_PROTOCOL, _spec_to_obj(self)])

    @classmethod
    def from_json(cls, text: str) -> TreeSpec:
        """Parse a ``treespec_dumps`` protocol-1 string (the ``data_spec`` of an index)."""
        try:
            protocol, obj = json.loads(text)
        except (TypeError, ValueError) as err:
            raise ValueError(f"data_spec is not a torch pytree spec string: {text!r:.200}") from err
        if protocol != _PROTOCOL:
            raise ValueError(f"data_spec uses pytree protocol {protocol}; only protocol 1 is supported")
        return _spec_from_obj(obj)


LEAF = TreeSpec(None)


def _node_type(obj: Any) -> str | None:
    kind = type(obj)
    if kind is dict:
        return _DICT
    if kind is list:
        return _LIST
    if kind is tuple:
        return _TUPLE
    if kind is collections.OrderedDict:
        return _ORDERED
    if kind is collections.defaultdict:
        return _DEFAULT
    if isinstance(obj, tuple) and hasattr(kind, "_fields"):
        return _NAMED
    return None


def tree_flatten(obj: Any) -> tuple[list[Any], TreeSpec]:
    """Split ``obj`` into its leaves (depth first, dicts in insertion order) and its spec."""
    leaves: list[Any] = []
    return leaves, _flatten(obj, leaves)


def _flatten(obj: Any, leaves: list[Any]) -> TreeSpec:
    node = _node_type(obj)
    if node is None:
        leaves.append(obj)
        return LEAF
    if node in (_DICT, _ORDERED, _DEFAULT):
        keys = list(obj.keys())
        children = tuple(_flatten(obj[k], leaves) for k in keys)
        if node == _DEFAULT:
            factory = obj.default_factory
            context: Any = {
                "default_factory_module": getattr(factory, "__module__", "builtins"),
                "default_factory_name": getattr(factory, "__qualname__", "None"),
                "dict_context": keys,
            }
            return TreeSpec(node, context, children)
        return TreeSpec(node, keys, children)
    children = tuple(_flatten(child, leaves) for child in obj)
    if node == _NAMED:
        name = _NAME_BY_NAMED.get(type(obj)) or f"{type(obj).__module__}.{type(obj).__qualname__}"
        return TreeSpec(node, name, children)
    return TreeSpec(node, None, children)


def flatten_like(obj: Any, spec: TreeSpec) -> list[Any] | None:
    """The leaves of ``obj`` if it has exactly the structure ``spec`` describes, else None.

    The writer's per-sample path: it checks the structure while collecting leaves, without
    building a new spec for every sample.
    """
    leaves: list[Any] = []
    return leaves if _match(obj, spec, leaves) else None


def _match(obj: Any, spec: TreeSpec, leaves: list[Any]) -> bool:
    kind = spec.type
    if _node_type(obj) != kind:
        return False
    if kind is None:
        leaves.append(obj)
        return True
    if len(obj) != len(spec.children):
        return False
    if kind in (_DICT, _ORDERED, _DEFAULT):
        keys = spec.context["dict_context"] if kind == _DEFAULT else spec.context
        for (key, value), expected, child in zip(obj.items(), keys, spec.children):
            if key != expected or not _match(value, child, leaves):
                return False
        return True
    if kind == _NAMED:
        name = _NAME_BY_NAMED.get(type(obj)) or f"{type(obj).__module__}.{type(obj).__qualname__}"
        if name != spec.context:
            return False
    return all(_match(value, child, leaves) for value, child in zip(obj, spec.children))


def flattener(spec: TreeSpec) -> Callable[[Any], list[Any] | None]:
    """:func:`flatten_like` for one spec, for the writer's hot path.

    A flat dict of leaves (the common sample) is matched by its keys alone: its values are
    returned as the leaves without checking that each is a leaf, so the caller must check any
    value whose type differs from what it expects (see ``SampleEncoder.leaves``).
    """
    if spec.type == _DICT and all(child.type is None for child in spec.children):
        keys = tuple(spec.context)

        def flat_dict(obj: Any) -> list[Any] | None:
            if type(obj) is dict and tuple(obj) == keys:
                return list(obj.values())
            return flatten_like(obj, spec)

        return flat_dict
    return lambda obj: flatten_like(obj, spec)


def is_node(obj: Any) -> bool:
    """Whether ``obj`` is a container the pytree walks into (not a leaf)."""
    return _node_type(obj) is not None


def unflattener(spec: TreeSpec) -> Callable[[list[Any]], Any]:
    """A function rebuilding samples of shape ``spec`` from their leaves, for the reader's hot path.

    Flat containers (a dict, tuple or list of leaves, or a bare leaf), the common case, skip the
    recursive walk; anything else uses :func:`tree_unflatten`.
    """
    flat = all(child.type is None for child in spec.children)
    if spec.type is None:
        return lambda leaves: leaves[0]
    if flat and spec.type == _DICT:
        keys = list(spec.context)
        return lambda leaves: dict(zip(keys, leaves))
    if flat and spec.type == _TUPLE:
        return tuple
    if flat and spec.type == _LIST:
        return list
    return lambda leaves: tree_unflatten(leaves, spec)


def tree_unflatten(leaves: list[Any] | tuple[Any, ...], spec: TreeSpec) -> Any:
    """Rebuild a sample from its leaves and spec (the inverse of :func:`tree_flatten`)."""
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"the spec expects {spec.num_leaves} leaves but {len(leaves)} were given")
    return _unflatten(iter(leaves), spec)


def _unflatten(leaves: Any, spec: TreeSpec) -> Any:
    if spec.type is None:
        return next(leaves)
    values = [_unflatten(leaves, child) for child in spec.children]
    if spec.type == _DICT:
        return dict(zip(spec.context, values))
    if spec.type == _LIST:
        return values
    if spec.type == _TUPLE:
        return tuple(values)
    if spec.type == _ORDERED:
        return collections.OrderedDict(zip(spec.context, values))
    if spec.type == _DEFAULT:
        factory = _import_dotted(spec.context["default_factory_module"], spec.context["default_factory_name"])
        return collections.defaultdict(factory, zip(spec.context["dict_context"], values))
    if spec.type == _NAMED:
        cls = _NAMED_BY_NAME.get(spec.context)
        if cls is None:
            module, _, name = spec.context.rpartition(".")
            cls = _import_dotted(module, name)
        return cls(*values)
    raise ValueError(f"unsupported pytree node type {spec.type!r} in data_spec")


def _import_dotted(module: str, name: str) -> Any:
    if module == "builtins" and name == "None":
        return None
    try:
        target: Any = builtins if module == "builtins" else importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(
            f"data_spec refers to {module}.{name}, which cannot be imported here; make the class importable "
            "under that name, or call litdata_format.register_namedtuple(cls, name) before reading"
        ) from err
    return target


def _spec_to_obj(spec: TreeSpec) -> dict[str, Any]:
    if spec.type is None:
        return {"type": None, "context": None, "children_spec": []}
    if spec.type in (_DICT, _ORDERED):
        context: Any = json.dumps([_key_to_json(k) for k in spec.context])
    elif spec.type == _DEFAULT:
        context = {**spec.context, "dict_context": [_key_to_json(k) for k in spec.context["dict_context"]]}
    elif spec.type == _NAMED:
        context = spec.context
    else:
        context = "null"
    return {"type": spec.type, "context": context, "children_spec": [_spec_to_obj(c) for c in spec.children]}


def _key_to_json(key: Any) -> Any:
    return list(key) if isinstance(key, tuple) else key


def _spec_from_obj(obj: Any) -> TreeSpec:
    try:
        kind, raw, children = obj["type"], obj["context"], obj["children_spec"]
    except (TypeError, KeyError) as err:
        raise ValueError(f"malformed node in data_spec: {obj!r:.200}") from err
    if kind is None:
        return LEAF
    kids = tuple(_spec_from_obj(c) for c in children)
    if kind in (_DICT, _ORDERED):
        keys = [tuple(k) if isinstance(k, list) else k for k in json.loads(raw)]
        return TreeSpec(kind, keys, kids)
    if kind == _DEFAULT:
        keys = [tuple(k) if isinstance(k, list) else k for k in raw["dict_context"]]
        return TreeSpec(kind, {**raw, "dict_context": keys}, kids)
    if kind == _NAMED:
        return TreeSpec(kind, raw, kids)
    if kind in _NAMED_BY_NAME or (isinstance(raw, str) and raw == kind):
        # Older torch writes a registered namedtuple with its serialized name as the type.
        return TreeSpec(_NAMED, kind, kids)
    if kind in (_LIST, _TUPLE):
        return TreeSpec(kind, None, kids)
    raise ValueError(f"unsupported pytree node type {kind!r} in data_spec")
