"""litdata-stream: StreamingDataset and StreamingDataLoader.

Stream optimized datasets from local disk or object storage into PyTorch, shuffled, split
evenly over ranks and workers, and resumable mid-epoch without repeating or skipping a sample.
Folders of Parquet files (local, object stores, ``hf://``) stream in place once indexed.
Names load their module on first use (:mod:`litdata_format.lazy`), so ``import litdata_stream`` imports
no torch until a name that needs it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

__version__ = "0.2.1000"

if TYPE_CHECKING:
    from litdata_stream._collate import litdata_collate as litdata_collate
    from litdata_stream._dataloader import StreamingDataLoader as StreamingDataLoader
    from litdata_stream._dataset import StreamingDataset as StreamingDataset
    from litdata_stream._mixing.combined import CombinedStreamingDataset as CombinedStreamingDataset
    from litdata_stream._mixing.parallel import ParallelStreamingDataset as ParallelStreamingDataset
    from litdata_stream._parquet_index import index_hf_dataset as index_hf_dataset
    from litdata_stream._parquet_index import index_parquet_dataset as index_parquet_dataset
    from litdata_stream._split import train_test_split as train_test_split
    from litdata_stream._upstream_cache import Cache as Cache
    from litdata_stream._watchdog import LoaderStallWarning as LoaderStallWarning
    from litdata_stream._watchdog import LoaderStats as LoaderStats

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
