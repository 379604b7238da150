"""litdata-prep: optimize, map and merge_datasets.

``optimize`` turns inputs into an optimized (chunked) dataset with worker processes, locally or
straight into a bucket, appendable and resumable after a crash; ``map`` runs a function that
writes files over inputs in parallel; ``merge_datasets`` joins optimized datasets. See
``docs/optimize.md``.

Names load their module on first use (PEP 562): a spawned worker imports only what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "ALL_DONE": "litdata_prep._engine",
    "BaseReader": "litdata_prep._readers",
    "DatasetUpdate": "litdata_prep._keyed",
    "DatasetExistsError": "litdata_prep._output",
    "ParquetReader": "litdata_prep._readers",
    "WorkerError": "litdata_prep._engine",
    "build_keys_index": "litdata_prep._keyed",
    "complete_dataset": "litdata_format",
    "dataset_update": "litdata_prep._keyed",
    "map": "litdata_prep._map",
    "merge_datasets": "litdata_prep._merge",
    "optimize": "litdata_prep._optimize",
    "walk": "litdata_prep._readers",
}

if TYPE_CHECKING:
    from litdata_format import complete_dataset
    from litdata_prep._engine import ALL_DONE, WorkerError
    from litdata_prep._keyed import DatasetUpdate, build_keys_index, dataset_update
    from litdata_prep._map import map
    from litdata_prep._merge import merge_datasets
    from litdata_prep._optimize import optimize
    from litdata_prep._output import DatasetExistsError
    from litdata_prep._readers import BaseReader, ParquetReader, walk

__all__ = [
    "ALL_DONE",
    "BaseReader",
    "DatasetExistsError",
    "DatasetUpdate",
    "ParquetReader",
    "WorkerError",
    "__version__",
    "build_keys_index",
    "complete_dataset",
    "dataset_update",
    "map",
    "merge_datasets",
    "optimize",
    "walk",
]

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)
