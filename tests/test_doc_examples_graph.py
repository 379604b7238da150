# PyG types every Data attribute as optional (Tensor | None); the examples use them as tensors.
# pyright: reportOptionalMemberAccess=false, reportArgumentType=false, reportAttributeAccessIssue=false
"""The graph examples of upstream's docs (PyG ``Data`` / ``HeteroData``, the ``Graph`` wrapper),
written with optimize into a local folder and streamed back.

Adapted only in: output folders under ``tmp_path``; ``start_method="fork"`` so optimize's workers
inherit the torch-geometric import (seconds of CPU each otherwise); the ``fn``s live in
``tests/support/doc_graph_fns.py`` (workers import them from there), with the docs' bodies; each test
imports them (and with them torch-geometric, under a warnings filter) when it runs, not at the top:
that import costs ~8 CPU-seconds, which every pytest-xdist worker collecting the suite paid.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from litdata import Graph, StreamingDataLoader, StreamingDataset, optimize

pytestmark = pytest.mark.slow


def test_homogeneous_data_and_gcn(tmp_path: Path) -> None:
    from tests.support.doc_graph_fns import Data, GCNConv, global_mean_pool, make_graph

    graphs = str(tmp_path / "graphs")
    optimize(make_graph, inputs=list(range(1024)), output_dir=graphs, chunk_size=64, start_method="fork")

    dataset = StreamingDataset(graphs)
    sample = dataset[0]  # Data when PyG is installed, else Graph
    loader = StreamingDataLoader(dataset, batch_size=32, shuffle=True)
    batch = next(iter(loader))  # DataBatch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GCNConv(8, 16)
            self.lin = torch.nn.Linear(16, 3)

        def forward(self, data):
            x = F.relu(self.conv(data.x, data.edge_index))
            return self.lin(global_mean_pool(x, data.batch))

    assert isinstance(sample, Data) and sample.x.shape[1] == 8 and sample.num_nodes == sample.x.shape[0]
    assert type(batch).__name__ == "DataBatch" and batch.num_graphs == 32
    assert Net()(batch).shape == (32, 3)
    assert len(dataset) == 1024


def test_graph_wrapper_without_pyg_at_write_time(tmp_path: Path) -> None:
    from tests.support.doc_graph_fns import Data, make_graph_wrapper

    make_graph = make_graph_wrapper  # the docs' second make_graph
    graphs = str(tmp_path / "graphs")
    optimize(make_graph, inputs=list(range(256)), output_dir=graphs, start_method="fork")
    # later: sample.to_pyg()  if the stream returned Graph
    sample = StreamingDataset(graphs)[3]
    assert isinstance(sample, Data)  # PyG is installed here
    assert sample.num_nodes == 6 and int(sample.y) == 1 and sample.edge_index.tolist() == [[0, 1, 2], [1, 2, 0]]
    assert isinstance(make_graph(3), Graph) and make_graph(3).to_pyg().num_nodes == 6


def test_heterogeneous_heterodata(tmp_path: Path) -> None:
    from tests.support.doc_graph_fns import HeteroData, make_hetero

    hetero = str(tmp_path / "hetero")
    optimize(make_hetero, inputs=list(range(512)), output_dir=hetero, chunk_size=32, start_method="fork")

    dataset = StreamingDataset(hetero)
    sample = dataset[0]  # HeteroData
    print(sample["paper"].x.shape, sample["author", "writes", "paper"].edge_index.shape)

    loader = StreamingDataLoader(dataset, batch_size=16)
    batch = next(iter(loader))  # HeteroDataBatch
    # batch["paper"].x, batch["paper"].batch, batch["author", "writes", "paper"].edge_index
    assert isinstance(sample, HeteroData) and tuple(sample["paper"].x.shape) == (8, 16)
    assert type(batch).__name__ == "HeteroDataBatch"
    assert tuple(batch["paper"].x.shape) == (16 * 8, 16) and batch["paper"].batch.max() == 15
    assert batch["author", "writes", "paper"].edge_index.shape == (2, 16 * 4)


def test_graph_plus_metadata_in_one_sample(tmp_path: Path) -> None:
    from tests.support.doc_graph_fns import make_row

    rows = str(tmp_path / "rows")
    optimize(make_row, inputs=list(range(1024)), output_dir=rows, start_method="fork")
    loader = StreamingDataLoader(StreamingDataset(rows), batch_size=8)
    batch = next(iter(loader))
    # batch["id"] is a tensor; batch["graph"] is a DataBatch
    assert isinstance(batch["id"], torch.Tensor) and batch["id"].shape == (8,)
    assert type(batch["graph"]).__name__ == "DataBatch" and batch["graph"].num_graphs == 8


def test_sample_subgraphs_first_then_stream(tmp_path: Path) -> None:
    from tests.support.doc_graph_fns import Data, sample_seed, train_seeds

    subgraphs = str(tmp_path / "subgraphs")
    optimize(sample_seed, inputs=train_seeds.tolist(), output_dir=subgraphs, start_method="fork")
    dataset = StreamingDataset(subgraphs)
    assert len(dataset) == len(train_seeds)
    assert all(isinstance(g, Data) and g.x.shape[1] == 4 and g.x.shape[0] == g.y.shape[0] for g in dataset)
