from __future__ import annotations

import collections
import json

import pytest

from litdata_format import TreeSpec, tree_flatten, tree_unflatten

Point = collections.namedtuple("Point", ["x", "y"])

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
    with pytest.raises(ValueError, match="unsupported pytree node type"):
        TreeSpec.from_json(json.dumps([1, {"type": "my.Type", "context": None, "children_spec": []}]))


def test_wrong_leaf_count() -> None:
    _, spec = tree_flatten((1, 2))
    with pytest.raises(ValueError, match="expects 2 leaves but 3"):
        tree_unflatten([1, 2, 3], spec)
