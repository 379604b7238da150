"""What the writer refuses so that every sample reads back as it was written.

A leaf whose number of dimensions changes is refused when its format stores no shape (1-D arrays
and tensors, stored raw as upstream does) and round-trips when it does (``numpy``, ``tensor``).
A namedtuple is written only when registered, a defaultdict only with a builtin factory: index.json
names them, and readers look those names up instead of importing them.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from litdata_format import BinaryWriter, DatasetReader, Tensor, TokensLoader, load_index, register_namedtuple

Pair = collections.namedtuple("Pair", ["left", "right"])
register_namedtuple(Pair, "tests.writer_rules.Pair")
Lonely = collections.namedtuple("Lonely", ["value"])


def _write(path: Path, samples: list[Any], **options: Any) -> list[Any]:
    writer = BinaryWriter(path, chunk_size=2, **options)
    for sample in samples:
        writer.write(sample)
    writer.done()
    writer.merge()
    reader = DatasetReader(path)
    return [reader[i] for i in range(len(reader))]


# (first leaf, a later leaf of another number of dimensions, the format the first one fixes)
FLAT_THEN_OTHER = {
    "numpy-1d-then-2d": (np.arange(4), np.arange(4).reshape(2, 2), "no_header_numpy"),
    "numpy-1d-then-0d": (np.arange(4), np.array(7), "no_header_numpy"),
    "numpy-1d-then-3d": (np.arange(4.0), np.ones((1, 2, 2)), "no_header_numpy"),
    "tensor-1d-then-2d": (torch.arange(4), torch.arange(4).reshape(2, 2), "no_header_tensor"),
    "tensor-1d-then-0d": (torch.arange(4), torch.tensor(7), "no_header_tensor"),
    "wrapper-1d-then-2d": (Tensor(array=np.arange(4)), Tensor(array=np.arange(4).reshape(2, 2)), "no_header_tensor"),
}


@pytest.mark.parametrize("case", sorted(FLAT_THEN_OTHER))
@pytest.mark.parametrize("position", [1, 3], ids=["second-sample", "after-fast-path"])
def test_a_flat_leaf_that_changes_dimensions_is_refused(tmp_path: Path, case: str, position: int) -> None:
    first, other, fmt = FLAT_THEN_OTHER[case]
    writer = BinaryWriter(tmp_path, chunk_size=2)
    for i in range(position):  # later samples take each serializer's leaf_encoder shortcut
        writer.write({"id": i, "v": first})
    with pytest.raises(ValueError) as caught:
        writer.write({"id": position, "v": other})
    message = str(caught.value)
    ndim = other.array.ndim if isinstance(other, Tensor) else other.ndim
    assert message.startswith(f"sample {position}, leaf 1 (sample['v']): a {ndim}-D array"), message
    assert f"{fmt} stores 1-D arrays without their shape" in message
    assert "same number of dimensions in every sample" in message
    writer.write({"id": position, "v": first})  # the refused sample left nothing behind
    writer.done()
    writer.merge()
    reader = DatasetReader(tmp_path)
    assert [reader[i]["id"] for i in range(len(reader))] == list(range(position + 1))
    assert load_index(tmp_path).data_format[1].startswith(fmt)


def test_tokens_of_another_dimension_are_refused(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=100, item_loader=TokensLoader())
    writer.write(np.arange(10, dtype=np.int32))
    with pytest.raises(ValueError, match=r"sample 1, leaf 0: a 2-D array"):
        writer.write(np.arange(10, dtype=np.int32).reshape(2, 5))


SHAPED = {
    "numpy": [np.ones((2, 3)), np.arange(5), np.array(3.5), np.zeros((0, 4)), np.ones((1, 2, 3), dtype=np.float64)],
    "tensor": [torch.ones(2, 3), torch.arange(5.0), torch.tensor(3.5), torch.zeros(0, 4), torch.ones(1, 2, 3)],
    "tensor-0d-first": [torch.tensor(1.0), torch.arange(3.0), torch.ones(2, 2)],
}


@pytest.mark.parametrize("case", sorted(SHAPED))
def test_formats_that_store_each_shape_round_trip_any_shape(tmp_path: Path, case: str) -> None:
    leaves = SHAPED[case]
    got = _write(tmp_path, [{"v": leaf} for leaf in leaves])
    assert load_index(tmp_path).data_format == ["numpy" if case == "numpy" else "tensor"]
    for leaf, sample in zip(leaves, got):
        assert tuple(sample["v"].shape) == tuple(leaf.shape)
        assert (sample["v"] == leaf).all()


def test_flat_leaves_of_any_length_round_trip(tmp_path: Path) -> None:
    got = _write(tmp_path, [{"v": np.arange(n), "t": torch.arange(n)} for n in (3, 0, 7)])
    assert [len(s["v"]) for s in got] == [3, 0, 7] and [len(s["t"]) for s in got] == [3, 0, 7]


def test_registered_namedtuples_round_trip(tmp_path: Path) -> None:
    samples = [Pair(i, {"inner": Pair(str(i), [i, i + 1])}) for i in range(5)]
    got = _write(tmp_path, samples)
    assert got == samples
    assert type(got[0]) is Pair and type(got[0].right["inner"]) is Pair
    assert '"context": "tests.writer_rules.Pair"' in load_index(tmp_path).config["data_spec"]


def test_an_unregistered_namedtuple_is_not_written(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=2)
    with pytest.raises(ValueError, match=r"sample 0: the namedtuple .*Lonely has no serialized name.*register_"):
        writer.write({"x": Lonely(1)})


def test_defaultdict_with_a_builtin_factory_round_trips(tmp_path: Path) -> None:
    samples = [collections.defaultdict(list, a=[i], b=[]) for i in range(3)]
    got = _write(tmp_path, samples)
    assert got == samples and got[0].default_factory is list


def test_defaultdict_with_another_factory_is_not_written(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=2)
    with pytest.raises(ValueError, match="sample 0: a defaultdict's default_factory .* cannot be written"):
        writer.write(collections.defaultdict(lambda: 0, a=1))
