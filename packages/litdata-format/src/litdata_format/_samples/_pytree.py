"""A small pytree: flatten samples into leaves and back, without torch.

The tree spec serializes to the string ``torch.utils._pytree.treespec_dumps`` writes (protocol
1), which upstream stores as ``data_spec``. As in torch, only the exact types dict, list, tuple,
OrderedDict, defaultdict and namedtuples are nodes (dicts in insertion order); all else is a leaf.

Reading a spec never imports a module or calls a name because ``index.json`` says so: a namedtuple
is found only among the classes given to :func:`register_namedtuple`, and a defaultdict's factory
only among a few builtin types; the writer refuses what a reader could not rebuild.
"""

from __future__ import annotations

import collections
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from litdata_format._guards import is_any_list, is_any_tuple

__all__ = ["LEAF", "TreeSpec", "flatten_like", "unflattener", "register_namedtuple", "tree_flatten", "tree_unflatten"]

# namedtuple classes known under a serialized name (as torch's ``_register_namedtuple`` does).
_NAMED_BY_NAME: dict[str, type] = {}
_NAME_BY_NAMED: dict[type, str] = {}


def register_namedtuple(cls: type, serialized_type_name: str) -> None:
    """Record ``cls`` under ``serialized_type_name`` in data_spec (both when writing and reading).

    A sample holding a namedtuple can only be written, and a dataset naming one only read, once
    its class is registered: the name in ``index.json`` is looked up here, never imported. Use
    the name upstream's writer registered (its ``litdata.utilities._pytree._register_namedtuple``).

    Args:
        cls: the namedtuple class.
        serialized_type_name: the name ``index.json`` stores for it.

    Raises:
        TypeError: ``cls`` is not a namedtuple class.
    """
    # Checked although typed: a wrong class would only fail when a dataset naming it is read.
    if not (isinstance(cls, type) and hasattr(cls, "_fields") and issubclass(cls, tuple)):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"register_namedtuple expects a namedtuple class, got {cls!r}")
    _NAMED_BY_NAME[serialized_type_name] = cls
    _NAME_BY_NAMED[cls] = serialized_type_name


_PROTOCOL = 1
_DICT, _LIST, _TUPLE = "builtins.dict", "builtins.list", "builtins.tuple"
_ORDERED, _DEFAULT, _NAMED = "collections.OrderedDict", "collections.defaultdict", "collections.namedtuple"

# The only defaultdict factories a spec may name: types whose call has no side effect. None (no
# factory) is read but never written, because torch's reader cannot rebuild it.
_FACTORIES: tuple[tuple[str, Any], ...] = (
    *((f"builtins.{factory.__name__}", factory) for factory in (list, dict, set, tuple, int, float, str, bool, bytes)),
    ("builtins.None", None),
)


def _factory_name(factory: Any) -> str:
    for name, known in _FACTORIES:
        if known is factory and factory is not None:
            return name
    raise ValueError(
        f"a defaultdict's default_factory {factory!r} cannot be written: data_spec may only name one of "
        f"{', '.join(name for name, f in _FACTORIES if f is not None)} (readers never import or call other "
        "names); use one of these or a plain dict"
    )


def _named_name(cls: type) -> str:
    name = _NAME_BY_NAMED.get(cls)
    if name is None:
        raise ValueError(
            f"the namedtuple {cls.__module__}.{cls.__qualname__} has no serialized name: call "
            f"litdata_format.register_namedtuple({cls.__qualname__}, '<name>') before writing and before "
            "reading (upstream LitData: litdata.utilities._pytree._register_namedtuple with the same name)"
        )
    return name


def _unregistered(name: Any) -> ValueError:
    return ValueError(
        f"data_spec names the type {name!r}, which is not registered here; litdata never imports or calls a "
        f"name because index.json says so. If the dataset is yours and {name!r} is your namedtuple, call "
        f"litdata_format.register_namedtuple(YourClass, {name!r}) before reading it"
    )


@dataclass(frozen=True)
class TreeSpec:
    """The shape of a sample: a node type, its context (dict keys, namedtuple class) and children.

    ``type`` is None for a leaf. ``context`` holds the list of keys for dict-like nodes, the
    class for a namedtuple and ``(default_factory, keys)`` for a defaultdict.
    """

    type: str | None
    context: Any = None
    children: tuple[TreeSpec, ...] = ()
    num_leaves: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        count = 1 if self.type is None else sum(c.num_leaves for c in self.children)
        object.__setattr__(self, "num_leaves", count)

    def is_leaf(self) -> bool:
        """True for the spec of a leaf (a value stored with a serializer), False for a container."""
        return self.type is None

    def to_json(self) -> str:
        """The spec as torch's ``treespec_dumps`` protocol-1 string.

        Raises:
            ValueError: a namedtuple is not registered, a defaultdict's factory is not a builtin type,
                or the sample nests deeper than a reader accepts (:data:`MAX_SPEC_NESTING`).
        """
        text = json.dumps([_PROTOCOL, _spec_to_obj(self)])
        deepest = _nesting(text)
        if deepest > MAX_SPEC_NESTING:
            raise ValueError(
                f"the sample's structure nests {deepest} levels deep in its data_spec; a reader accepts at most "
                f"{MAX_SPEC_NESTING} (~{MAX_SPEC_NESTING // 2} nested containers): flatten it"
            )
        return text

    @classmethod
    def from_json(cls, text: str) -> TreeSpec:
        """Parse a ``treespec_dumps`` protocol-1 string (the ``data_spec`` of an index).

        Raises:
            ValueError: the string is malformed, or names a type that is neither a container nor a
                registered namedtuple, or a defaultdict factory outside the builtin types.
        """
        try:
            deepest = _nesting(text)
        except TypeError as err:
            raise _not_a_spec(text) from err
        if deepest > MAX_SPEC_NESTING:
            raise ValueError(
                f"data_spec nests {deepest} levels deep (at most {MAX_SPEC_NESTING}: a sample inside ~"
                f"{MAX_SPEC_NESTING // 2} containers); it is not a spec optimize wrote"
            )
        try:
            protocol, obj = json.loads(text)
        except (TypeError, ValueError) as err:
            raise _not_a_spec(text) from err
        if protocol != _PROTOCOL:
            raise ValueError(f"data_spec uses pytree protocol {protocol}; only protocol 1 is supported")
        return _spec_from_obj(obj)


LEAF = TreeSpec(None)

# json's parser recurses once per level: a hostile spec would reach the recursion limit, where
# anything that runs then (a garbage collection's finalizers) fails too, so the depth is checked
# first. Each container adds 2 levels (its node and its children list): 400 is ~200 containers.
MAX_SPEC_NESTING = 400
_JSON_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def _not_a_spec(text: object) -> ValueError:
    return ValueError(f"data_spec is not a torch pytree spec string: {text!r:.200}")


def _nesting(text: str) -> int:
    """How deep the JSON ``text`` nests its arrays and objects (brackets inside strings do not count)."""
    skeleton = _NOT_BRACKETS.sub("", _JSON_STRINGS.sub("", text))
    levels = itertools.accumulate(1 if c in "[{" else -1 for c in skeleton)
    return max(levels, default=0)


_NODES: dict[type, str] = {
    dict: _DICT, list: _LIST, tuple: _TUPLE, collections.OrderedDict: _ORDERED, collections.defaultdict: _DEFAULT
}  # fmt: skip


def _node_type(obj: object) -> str | None:
    kind = type(obj)
    found = _NODES.get(kind)
    if found is None and isinstance(obj, tuple) and hasattr(kind, "_fields"):
        return _NAMED
    return found


def tree_flatten(obj: Any) -> tuple[list[Any], TreeSpec]:
    """Split ``obj`` (nested dicts, lists, tuples and namedtuples of leaves) into its leaves and its spec.

    Leaves come depth first, dicts in insertion order.
    """
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
        return TreeSpec(node, (obj.default_factory, keys) if node == _DEFAULT else keys, children)
    children = tuple(_flatten(child, leaves) for child in obj)
    return TreeSpec(node, type(obj) if node == _NAMED else None, children)


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
        keys = spec.context
        if kind == _DEFAULT:
            factory, keys = spec.context
            if obj.default_factory is not factory:
                return False
        for (key, value), expected, child in zip(obj.items(), keys, spec.children):
            if key != expected or not _match(value, child, leaves):
                return False
        return True
    if kind == _NAMED and type(obj) is not spec.context:
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
            sample: dict[Any, Any] = obj  # only read as a dict once its type is checked
            if type(sample) is dict and tuple(sample) == keys:
                return list(sample.values())
            return flatten_like(obj, spec)

        return flat_dict
    return lambda obj: flatten_like(obj, spec)


def _steps(spec: TreeSpec) -> list[str]:
    """How each child of a node is reached (``['image']``, ``[1]``, ``.x``)."""
    if spec.type in (_DICT, _ORDERED, _DEFAULT):
        keys: list[Any] = spec.context[1] if spec.type == _DEFAULT else spec.context
        return [f"[{key!r}]" for key in keys]
    if spec.type == _NAMED:
        names: tuple[str, ...] = spec.context._fields
        return [f".{name}" for name in names]
    return [f"[{i}]" for i in range(len(spec.children))]


def leaf_paths(spec: TreeSpec) -> list[str]:
    """Where each leaf sits in a sample (``['image']``, ``[1][0]``, ``.x``; ``""`` for a bare leaf)."""
    if spec.type is None:
        return [""]
    return [step + rest for step, child in zip(_steps(spec), spec.children) for rest in leaf_paths(child)]


def _kind(spec: TreeSpec) -> str:
    if spec.type is None:
        return "a value"
    if spec.type == _NAMED:
        return f"a {spec.context.__name__}"
    return {_DICT: "a dict", _LIST: "a list", _TUPLE: "a tuple"}.get(spec.type, f"a {spec.type.rsplit('.', 1)[-1]}")


def _keys(steps: list[str]) -> str:
    return ", ".join(step[1:-1] for step in steps)


def spec_difference(found: TreeSpec, first: TreeSpec, path: str = "") -> str:
    """Where the structure ``found`` (at ``path`` in its sample) first departs from the first sample's, in words.

    E.g. ``sample['tokens'] is a list of 3 items where the first sample's had 2``.
    """
    where = f"sample{path}"
    if found.type != first.type:
        return f"{where} is {_kind(found)} where the first sample had {_kind(first)}"
    if found.type in (_LIST, _TUPLE) and len(found.children) != len(first.children):
        return (
            f"{where} is {_kind(found)} of {len(found.children)} items where the first sample's had "
            f"{len(first.children)}"
        )
    steps, expected = _steps(found), _steps(first)
    if steps != expected:
        if found.type in (_DICT, _ORDERED, _DEFAULT):
            # The keys' reprs, in the order given (the same keys in another order are another structure).
            return f"{where} has the keys {_keys(steps)} where the first sample had {_keys(expected)}"
        return f"{where} has the fields {', '.join(steps)} where the first sample had {', '.join(expected)}"
    for step, child, other in zip(steps, found.children, first.children):
        if child != other:
            return spec_difference(child, other, path + step)
    return f"{where} is {_kind(found)} unlike the first sample's"


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
    """Rebuild a sample from its leaves (in :func:`tree_flatten`'s order) and spec."""
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
        factory, keys = spec.context
        return collections.defaultdict(factory, zip(keys, values))
    if spec.type == _NAMED:
        return spec.context(*values)
    raise ValueError(f"unsupported pytree node type {spec.type!r} in data_spec")


def _spec_to_obj(spec: TreeSpec) -> dict[str, Any]:
    if spec.type is None:
        return {"type": None, "context": None, "children_spec": []}
    if spec.type in (_DICT, _ORDERED):
        context: Any = json.dumps([_key_to_json(k) for k in spec.context])
    elif spec.type == _DEFAULT:
        factory, keys = spec.context
        module, _, name = _factory_name(factory).partition(".")
        context = {
            "default_factory_module": module,
            "default_factory_name": name,
            "dict_context": [_key_to_json(k) for k in keys],
        }
    elif spec.type == _NAMED:
        context = _named_name(spec.context)
    else:
        context = "null"
    return {"type": spec.type, "context": context, "children_spec": [_spec_to_obj(c) for c in spec.children]}


def _key_to_json(key: Any) -> Any:
    return list(key) if is_any_tuple(key) else key


def _spec_from_obj(obj: Any) -> TreeSpec:
    try:
        kind, raw, children = obj["type"], obj["context"], obj["children_spec"]
    except (TypeError, KeyError) as err:
        raise ValueError(f"malformed node in data_spec: {obj!r:.200}") from err
    if kind is None:
        return LEAF
    kids = tuple(_spec_from_obj(c) for c in children)
    if kind in (_DICT, _ORDERED):
        keys = [tuple(k) if is_any_list(k) else k for k in json.loads(raw)]
        return TreeSpec(kind, keys, kids)
    if kind == _DEFAULT:
        try:
            name = f"{raw['default_factory_module']}.{raw['default_factory_name']}"
            keys = [tuple(k) if is_any_list(k) else k for k in raw["dict_context"]]
        except (TypeError, KeyError) as err:
            raise ValueError(f"malformed defaultdict node in data_spec: {obj!r:.200}") from err
        for known, factory in _FACTORIES:
            if known == name:
                return TreeSpec(kind, (factory, keys), kids)
        raise ValueError(
            f"data_spec names {name!r} as a defaultdict's default_factory; litdata never imports or calls a name "
            f"because index.json says so and only takes {', '.join(n for n, _ in _FACTORIES)}"
        )
    if kind in (_LIST, _TUPLE):
        return TreeSpec(kind, None, kids)
    # A namedtuple: its serialized name is the context ("collections.namedtuple", as torch writes
    # it now) or the type itself (older torch). Only a registered class is ever used.
    name = raw if kind == _NAMED else kind
    cls = _NAMED_BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        raise _unregistered(name)
    fields: tuple[str, ...] = getattr(cls, "_fields")  # noqa: B009  # register_namedtuple only takes namedtuples
    if len(kids) != len(fields):
        raise ValueError(
            f"data_spec gives the namedtuple {name!r} {len(kids)} children, but the class registered under that "
            f"name has {len(fields)} fields {fields}; register the class this dataset was written with"
        )
    return TreeSpec(_NAMED, cls, kids)
