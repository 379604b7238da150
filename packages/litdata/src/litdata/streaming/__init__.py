"""Upstream's ``litdata.streaming`` import path."""

from litdata_format import TokensLoader
from litdata_stream import StreamingDataLoader, StreamingDataset

__all__ = ["StreamingDataLoader", "StreamingDataset", "TokensLoader"]
