"""``litdata_collate``: PyTorch Geometric graphs become a ``Batch``; everything else default_collate."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from torch.utils.data import default_collate

__all__ = ["litdata_collate"]


def _is_graph(value: Any) -> bool:
    pyg = sys.modules.get("torch_geometric.data")
    if pyg is not None and isinstance(value, pyg.data.BaseData if hasattr(pyg, "data") else pyg.BaseData):
        return True
    return type(value).__name__ == "Graph" and type(value).__module__.startswith("litdata_format")


def litdata_collate(batch: Sequence[Any]) -> Any:
    """Collate a list of samples into a batch.

    Graph leaves (PyG ``Data`` / ``HeteroData``) are joined with ``Batch.from_data_list``; a
    ``Graph`` returned without PyG installed stays a list. Dicts, tuples and lists are collated
    key by key, so a graph can sit next to ordinary tensors in one sample.
    """
    first = batch[0]
    if _is_graph(first):
        try:
            from torch_geometric.data import Batch
        except ImportError:
            return list(batch)
        if type(first).__name__ == "Graph":
            return list(batch)
        return Batch.from_data_list(list(batch))
    if isinstance(first, Mapping):
        return {key: litdata_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(litdata_collate(list(group)) for group in zip(*batch)))
    if isinstance(first, (tuple, list)) and not isinstance(first, str):
        return [litdata_collate(list(group)) for group in zip(*batch)]
    return default_collate(list(batch))
