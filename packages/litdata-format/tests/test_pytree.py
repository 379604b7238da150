from __future__ import annotations

import collections
import json

import pytest

from litdata_format import register_namedtuple
from litdata_format._samples._pytree import TreeSpec
from litdata_format.internal import tree_flatten, tree_unflatten

Point = collections.namedtuple("Point", ["x", "y"])
register_namedtuple(Point, "test_pytree.Point")
Unregistered = collections.namedtuple("Unregistered", ["a"])

SAMPLES = [
    5,
    None,
    "text",
    {"a": 1, "b": [2, (3, 4)]},
    (1, "x"),
    [],
    {},
    collections.OrderedDict(z=1, y=2),
    Point(1, [2, 3]),
    collections.defaultdict(list, a=[1]),
    {1: "a", (2, 3): "b"},
    {"nested": {"deep": [{"k": (1.5, None)}]}},
]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: type(s).__name__)
def test_round_trip(sample: object) -> None:
    leaves, spec = tree_flatten(sample)
    rebuilt = tree_unflatten(leaves, spec)
    assert rebuilt == sample
    assert type(rebuilt) is type(sample)
    assert TreeSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize("sample", [s for s in SAMPLES if not isinstance(s, Point)], ids=lambda s: type(s).__name__)
def test_spec_string_matches_torch(sample: object) -> None:
    pytree = pytest.importorskip("torch.utils._pytree")
    leaves, spec = tree_flatten(sample)
    torch_leaves, torch_spec = pytree.tree_flatten(sample)
    assert leaves == torch_leaves
    assert spec.to_json() == pytree.treespec_dumps(torch_spec)
    assert TreeSpec.from_json(pytree.treespec_dumps(torch_spec)) == spec


def test_dict_leaves_follow_insertion_order() -> None:
    leaves, _ = tree_flatten({"b": 1, "a": 2})
    assert leaves == [1, 2]


def test_bad_spec_strings() -> None:
    with pytest.raises(ValueError, match="not a torch pytree spec"):
        TreeSpec.from_json("{")
    with pytest.raises(ValueError, match="protocol 7"):
        TreeSpec.from_json(json.dumps([7, {}]))
    with pytest.raises(ValueError, match="names the type 'my.Type', which is not registered"):
        TreeSpec.from_json(json.dumps([1, {"type": "my.Type", "context": None, "children_spec": []}]))


def _spec(node_type: str, context: object, leaves: int = 1) -> str:
    leaf = {"type": None, "context": None, "children_spec": []}
    return json.dumps([1, {"type": node_type, "context": context, "children_spec": [leaf] * leaves}])


def test_registered_namedtuples_are_found_by_name_in_both_spellings() -> None:
    assert tree_unflatten([1, 2], TreeSpec.from_json(_spec("collections.namedtuple", "test_pytree.Point", 2))) == (
        Point(1, 2)
    )
    # Older torch wrote a registered namedtuple's name as the node type itself.
    assert TreeSpec.from_json(_spec("test_pytree.Point", "test_pytree.Point", 2)).context is Point


def test_a_namedtuple_with_other_fields_than_the_registered_class_is_refused() -> None:
    with pytest.raises(ValueError, match=r"gives the namedtuple 'test_pytree.Point' 3 children.*2 fields"):
        TreeSpec.from_json(_spec("collections.namedtuple", "test_pytree.Point", 3))


@pytest.mark.parametrize("name", ["builtins.exec", "os.system", "collections.Counter", "test_pytree.Unregistered"])
def test_a_spec_never_names_a_callable(name: str) -> None:
    for spelling in (_spec("collections.namedtuple", name), _spec(name, name)):
        with pytest.raises(ValueError, match=rf"names the type '{name}', which is not registered.*register_namedtuple"):
            TreeSpec.from_json(spelling)


@pytest.mark.parametrize(
    ("module", "name"), [("os", "system"), ("builtins", "exec"), ("builtins", "eval"), ("json", "loads")]
)
def test_defaultdict_factories_are_a_fixed_set(module: str, name: str) -> None:
    context = {"default_factory_module": module, "default_factory_name": name, "dict_context": ["k"]}
    with pytest.raises(ValueError, match=rf"names '{module}.{name}' as a defaultdict's default_factory"):
        TreeSpec.from_json(_spec("collections.defaultdict", context))


def test_defaultdict_without_factory_still_reads() -> None:
    context = {"default_factory_module": "builtins", "default_factory_name": "None", "dict_context": ["k"]}
    rebuilt = tree_unflatten([1], TreeSpec.from_json(_spec("collections.defaultdict", context)))
    assert rebuilt == {"k": 1} and rebuilt.default_factory is None


@pytest.mark.parametrize(
    "sample",
    [Unregistered(1), {"p": [Unregistered(1)]}, collections.defaultdict(lambda: 0, k=1), collections.defaultdict(None)],
    ids=["namedtuple", "nested-namedtuple", "lambda-factory", "no-factory"],
)
def test_what_a_reader_could_not_rebuild_is_not_written(sample: object) -> None:
    leaves, spec = tree_flatten(sample)
    assert tree_unflatten(leaves, spec) == sample  # in memory every namedtuple and factory is fine
    with pytest.raises(ValueError, match="register_namedtuple|default_factory"):
        spec.to_json()


def test_wrong_leaf_count() -> None:
    _, spec = tree_flatten((1, 2))
    with pytest.raises(ValueError, match="expects 2 leaves but 3"):
        tree_unflatten([1, 2, 3], spec)


def _nested(depth: int) -> object:
    sample: object = {"leaf": 1, "text": "[[[{{"}  # brackets inside strings are not structure
    for _ in range(depth):
        sample = [sample]
    return sample


def test_a_spec_nests_at_most_what_a_reader_accepts() -> None:
    # 150 containers deep is written and read back; 250 is refused by the writer, and a spec that deep
    # (or a hostile one, 200,000 levels) is refused by the reader before json's parser recurses into it.
    leaves, spec = tree_flatten(_nested(150))
    assert tree_unflatten(leaves, TreeSpec.from_json(spec.to_json())) == _nested(150)
    _, deep = tree_flatten(_nested(250))
    with pytest.raises(ValueError, match="nests 505 levels deep in its data_spec; a reader accepts at most 400"):
        deep.to_json()
    with pytest.raises(ValueError, match="data_spec nests 200000 levels deep"):
        TreeSpec.from_json("[" * 200_000 + "]" * 200_000)
