"""``litdata_collate``: PyTorch Geometric graphs become a ``Batch``; everything else default_collate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate

from litdata_format import Graph, is_pyg_data

__all__ = ["litdata_collate"]


def litdata_collate(batch: Sequence[Any]) -> Any:
    """Collate a list of samples into a batch.

    Graph leaves (PyG ``Data`` / ``HeteroData``) are joined with ``Batch.from_data_list``; a
    ``Graph`` returned without PyG installed stays a list. Dicts, tuples and lists are collated
    key by key, so a graph can sit next to ordinary tensors in one sample.
    """
    first = batch[0]
    if isinstance(first, Graph):  # returned without PyG installed: nothing to batch them with
        return list(batch)
    if is_pyg_data(first):
        from torch_geometric.data import Batch

        return Batch.from_data_list(list(batch))
    # Same-shape numeric arrays: one stack and one tensor per batch (default_collate makes a
    # tensor per sample first).
    if (
        isinstance(first, np.ndarray)
        and first.dtype.kind in "biufc"
        and all(isinstance(x, np.ndarray) and x.shape == first.shape and x.dtype == first.dtype for x in batch)
    ):
        return torch.from_numpy(np.stack(batch))
    if isinstance(first, Mapping):
        return {key: litdata_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(litdata_collate(list(group)) for group in zip(*batch)))
    if isinstance(first, (tuple, list)) and not isinstance(first, str):
        return [litdata_collate(list(group)) for group in zip(*batch)]
    return default_collate(list(batch))
