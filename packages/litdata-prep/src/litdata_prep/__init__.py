"""litdata-prep: optimize, map and merge_datasets.

``optimize`` turns inputs into an optimized (chunked) dataset with worker processes, locally or
straight into a bucket, appendable and resumable after a crash; ``map`` runs a function that
writes files over inputs in parallel; ``merge_datasets`` joins optimized datasets. See
``docs/optimize.md``.
"""

from litdata_format import complete_dataset
from litdata_prep._engine import ALL_DONE, WorkerError
from litdata_prep._map import map
from litdata_prep._merge import merge_datasets
from litdata_prep._optimize import optimize
from litdata_prep._readers import BaseReader, ParquetReader, walk

__version__ = "0.1.0"

__all__ = [
    "ALL_DONE",
    "BaseReader",
    "ParquetReader",
    "WorkerError",
    "__version__",
    "complete_dataset",
    "map",
    "merge_datasets",
    "optimize",
    "walk",
]
