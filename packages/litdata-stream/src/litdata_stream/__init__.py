"""litdata-stream: StreamingDataset and StreamingDataLoader.

Stream optimized datasets from local disk or object storage into PyTorch, shuffled, split
evenly over ranks and workers, and resumable mid-epoch without repeating or skipping a sample.
Folders of Parquet files (local, object stores, ``hf://``) stream in place once indexed.
"""

from litdata_stream._cache import Cache
from litdata_stream._collate import litdata_collate
from litdata_stream._combined import CombinedStreamingDataset
from litdata_stream._dataloader import StreamingDataLoader
from litdata_stream._dataset import StreamingDataset
from litdata_stream._parallel import ParallelStreamingDataset
from litdata_stream._parquet_index import index_hf_dataset, index_parquet_dataset
from litdata_stream._split import train_test_split
from litdata_stream._watchdog import LoaderStallWarning, LoaderStats

__version__ = "0.1.0"

__all__ = [
    "Cache",
    "CombinedStreamingDataset",
    "LoaderStallWarning",
    "LoaderStats",
    "ParallelStreamingDataset",
    "StreamingDataLoader",
    "StreamingDataset",
    "__version__",
    "index_hf_dataset",
    "index_parquet_dataset",
    "litdata_collate",
    "train_test_split",
]
