"""litdata_collate: PyG graphs become a Batch; other leaves use default_collate."""

from __future__ import annotations

import datetime
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from litdata_format import BinaryWriter, Graph
from litdata_stream import StreamingDataLoader, StreamingDataset, litdata_collate


def _pyg() -> Any:
    """``torch_geometric.data``, imported when a test uses it: ~8 CPU-seconds, which every pytest-xdist
    worker paid when this file was collected (the import used to be here, at the top)."""
    with warnings.catch_warnings():  # torch_geometric warns about torch.jit on import (an error here)
        warnings.simplefilter("ignore")
        return pytest.importorskip("torch_geometric.data")


def _graph(i: int) -> Any:
    return _pyg().Data(x=torch.full((3, 2), float(i)), edge_index=torch.tensor([[0, 1], [1, 2]]), y=torch.tensor(i))


def test_graph_samples_become_a_batch(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=4)
    for i in range(10):
        writer.add_item(i, {"id": i, "graph": _graph(i)})
    writer.done()
    writer.merge()
    batch = next(iter(StreamingDataLoader(StreamingDataset(tmp_path), batch_size=4)))
    assert torch.equal(batch["id"], torch.arange(4))
    assert isinstance(batch["graph"], _pyg().Batch)
    assert batch["graph"].num_graphs == 4
    assert batch["graph"].x.shape == (12, 2)
    assert torch.equal(batch["graph"].batch, torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]))


def test_bare_graph_wrapper_batches_stay_a_list() -> None:
    graphs = [Graph(x=torch.ones(2, 2), edge_index=torch.tensor([[0], [1]])) for _ in range(3)]
    assert litdata_collate(graphs) == graphs


def test_plain_leaves_use_default_collate() -> None:
    batch = litdata_collate([{"a": torch.ones(2), "b": (1, "x")}, {"a": torch.zeros(2), "b": (2, "y")}])
    assert torch.equal(batch["a"], torch.tensor([[1.0, 1.0], [0.0, 0.0]]))
    assert torch.equal(batch["b"][0], torch.tensor([1, 2])) and batch["b"][1] == ["x", "y"]


def test_pil_images_stay_a_list_next_to_collated_leaves() -> None:
    """torch's default_collate raises TypeError on PIL images (an MDS ``pil`` column): they stay a list."""
    from PIL import Image

    images = [Image.new("RGB", (4, 4), (i, 0, 0)) for i in range(3)]
    batch = litdata_collate([{"id": i, "image": image} for i, image in enumerate(images)])
    assert torch.equal(batch["id"], torch.arange(3))
    assert batch["image"] == images


# Issue 47: a batch torch cannot collate names the field, the sample of the batch and what to do,
# where torch's own error names neither (a bare "found <class 'NoneType'>", "stack expects ...").
@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        ([{"a": 1, "label": 0}, {"a": 2, "label": None}], "sample['label']: sample 1 of the batch holds None"),
        (
            [{"when": datetime.datetime(2026, 1, 1)}] * 2,
            "sample['when']: torch cannot batch datetime values. Convert them in a transform",
        ),
        (
            [{"image": {"bytes": b"\x89PNG", "path": None}}] * 2,
            "sample['image']: it is a Hugging Face Image() or Audio() struct",
        ),
        (
            [{"x": [np.zeros(3)]}, {"x": [np.zeros(4)]}],
            "sample['x'][0]: sample 1 of the batch has shape (4,) where sample 0 has (3,). Pad or crop",
        ),
        ([{"a": 1}, {"b": 2}], "sample['a']: sample 1 of the batch has no 'a' where sample 0 has one"),
    ],
)
def test_what_torch_cannot_collate_is_named(batch: list[Any], expected: str) -> None:
    with pytest.raises((TypeError, RuntimeError), match="cannot collate") as err:
        litdata_collate(batch)
    assert expected in str(err.value)
    assert "collate_fn" in str(err.value)


def test_a_worker_s_collate_error_names_the_field(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=4)
    for i in range(8):
        writer.add_item(i, {"index": i, "tokens": np.arange(2 + i % 3)})  # ragged: PyTree items, one array each
    writer.done()
    writer.merge()
    loader = StreamingDataLoader(StreamingDataset(str(tmp_path)), batch_size=4, num_workers=1)
    with pytest.raises(RuntimeError, match=r"cannot collate sample\['tokens'\]: sample 1 of the batch has shape"):
        next(iter(loader))
