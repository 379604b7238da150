"""litdata-prep: optimize, map and merge_datasets.

``optimize`` turns inputs into an optimized (chunked) dataset with worker processes, locally or
straight into a bucket, appendable and resumable after a crash; ``map`` runs a function that
writes files over inputs in parallel; ``merge_datasets`` joins optimized datasets. Both run on a
Ray cluster with ``executor="ray"``, and ``LitDataDatasource``/``LitDataDatasink`` connect datasets
to Ray Data (``pip install "litdata-prep[ray]"``). See ``docs/optimize.md``.

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
    "DatasetExistsError": "litdata_prep._output",
    "LitDataDatasink": "litdata_prep._ray_data",
    "LitDataDatasource": "litdata_prep._ray_data",
    "ParquetReader": "litdata_prep._readers",
    "RayExecutor": "litdata_prep._ray",
    "WorkerError": "litdata_prep._engine",
    "complete_dataset": "litdata_format",
    "map": "litdata_prep._map",
    "merge_datasets": "litdata_prep._merge",
    "optimize": "litdata_prep._optimize",
    "walk": "litdata_prep._readers",
}

if TYPE_CHECKING:
    from litdata_format import complete_dataset
    from litdata_prep._engine import ALL_DONE, WorkerError
    from litdata_prep._map import map
    from litdata_prep._merge import merge_datasets
    from litdata_prep._optimize import optimize
    from litdata_prep._output import DatasetExistsError
    from litdata_prep._ray import RayExecutor
    from litdata_prep._ray_data import LitDataDatasink, LitDataDatasource
    from litdata_prep._readers import BaseReader, ParquetReader, walk

__all__ = [
    "ALL_DONE",
    "BaseReader",
    "DatasetExistsError",
    "LitDataDatasink",
    "LitDataDatasource",
    "ParquetReader",
    "RayExecutor",
    "WorkerError",
    "__version__",
    "complete_dataset",
    "map",
    "merge_datasets",
    "optimize",
    "walk",
]

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)
