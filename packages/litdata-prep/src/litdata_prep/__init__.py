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

__version__ = "0.2.1000"

if TYPE_CHECKING:
    from litdata_format import complete_dataset as complete_dataset
    from litdata_prep._engine import ALL_DONE as ALL_DONE
    from litdata_prep._engine import WorkerError as WorkerError
    from litdata_prep._key_index import DatasetUpdate as DatasetUpdate
    from litdata_prep._key_index import build_keys_index as build_keys_index
    from litdata_prep._key_index import dataset_update as dataset_update
    from litdata_prep._map import map as map
    from litdata_prep._merge import merge_datasets as merge_datasets
    from litdata_prep._optimize import optimize as optimize
    from litdata_prep._output import DatasetExistsError as DatasetExistsError
    from litdata_prep._ray.data import LitDataDatasink as LitDataDatasink
    from litdata_prep._ray.data import LitDataDatasource as LitDataDatasource
    from litdata_prep._ray.executor import RayExecutor as RayExecutor
    from litdata_prep._ray.machine import Machine as Machine
    from litdata_prep._readers import BaseReader as BaseReader
    from litdata_prep._readers import ParquetReader as ParquetReader
    from litdata_prep._readers import walk as walk

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
