"""Upstream's ``litdata.streaming`` import path."""

from litdata_format import TokensLoader
from litdata_stream import (
    Cache,
    CombinedStreamingDataset,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
)

__all__ = [
    "Cache",
    "CombinedStreamingDataset",
    "ParallelStreamingDataset",
    "StreamingDataLoader",
    "StreamingDataset",
    "TokensLoader",
]
