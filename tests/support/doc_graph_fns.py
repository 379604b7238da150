"""The graph examples' ``fn``s (upstream docs, "Graphs"), importable by optimize's workers.

Kept apart from the other example functions because importing torch-geometric costs seconds of
CPU; the tests fork their workers, so the workers inherit the import instead of repeating it.
The bodies are the docs' code unchanged.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from litdata import Graph

with warnings.catch_warnings():
    # torch-geometric still calls torch.jit.script at import, which torch 2.15 deprecates; the
    # tests import its names from here so the warning (an error under pytest) is not raised.
    warnings.simplefilter("ignore", FutureWarning)
    from torch_geometric.data import Data, HeteroData
    from torch_geometric.nn import GCNConv, global_mean_pool
    from torch_geometric.utils import k_hop_subgraph

__all__ = ["Data", "GCNConv", "HeteroData", "global_mean_pool"]


def make_graph(i: int) -> Data:
    n = 8 + i % 5
    src = torch.randint(0, n, (12,), dtype=torch.long)
    dst = torch.randint(0, n, (12,), dtype=torch.long)
    return Data(
        x=torch.randn(n, 8),
        edge_index=torch.stack([src, dst], 0),
        y=torch.tensor(i % 3),
        train_mask=torch.ones(n, dtype=torch.bool),
        num_nodes=n,
    )


def make_graph_wrapper(i: int) -> Graph:
    """The docs' second ``make_graph`` (Graph wrapper, no PyG at write time)."""
    n = 6
    return Graph(
        x=torch.randn(n, 4),
        edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]], dtype=torch.long),
        y=torch.tensor(i % 2),
        data={"num_nodes": n},  # extra tensors/scalars; field kwargs override data=
    )


def make_hetero(i: int) -> HeteroData:
    data = HeteroData()
    data["paper"].x = torch.randn(8, 16)
    data["author"].x = torch.randn(4, 8)
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 2, 3], [0, 2, 4, 6]], dtype=torch.long)
    data.y = torch.tensor(i % 3)
    return data


def make_row(i: int) -> dict:
    return {"id": i, "graph": make_graph(i)}


class _Subgraph:
    def __init__(self, x: torch.Tensor, edge_index: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.edge_index, self.y = x, edge_index, y


class KHopSampler:
    """Stands in for the docs' commented-out ``NeighborSampler(big_graph, num_neighbors=[10, 10])``:
    the docs call ``sampler.sample_from_nodes(seeds)`` and read ``out.x/.edge_index/.y``, which PyG's
    own sampler does not offer (it takes a ``NodeSamplerInput`` and returns node ids), so this one
    takes the 2-hop subgraph around the seeds with ``k_hop_subgraph``."""

    def __init__(self, graph: Data) -> None:
        self.graph: Any = graph  # PyG types its attributes as optional

    def sample_from_nodes(self, seeds: torch.Tensor) -> Any:
        nodes, edge_index, _, _ = k_hop_subgraph(seeds, 2, self.graph.edge_index, relabel_nodes=True)
        return _Subgraph(self.graph.x[nodes], edge_index, self.graph.y[nodes])


def _big_graph() -> Data:
    generator = torch.Generator().manual_seed(0)
    n = 200
    edge_index = torch.randint(0, n, (2, 800), generator=generator)
    return Data(x=torch.randn(n, 4, generator=generator), edge_index=edge_index, y=torch.arange(n) % 4)


sampler = KHopSampler(_big_graph())
train_seeds = torch.arange(0, 200, 4)


def sample_seed(seed: int) -> Data:
    out = sampler.sample_from_nodes(torch.tensor([seed]))
    return Data(x=out.x, edge_index=out.edge_index, y=out.y)
