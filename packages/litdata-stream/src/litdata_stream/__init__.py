"""litdata-stream: StreamingDataset and StreamingDataLoader.

Stream optimized datasets from local disk or object storage into PyTorch, shuffled, split
evenly over ranks and workers, and resumable mid-epoch without repeating or skipping a sample.
"""

from litdata_stream._collate import litdata_collate
from litdata_stream._dataloader import StreamingDataLoader
from litdata_stream._dataset import StreamingDataset

__version__ = "0.1.0"

__all__ = ["StreamingDataLoader", "StreamingDataset", "__version__", "litdata_collate"]
