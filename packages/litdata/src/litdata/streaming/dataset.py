"""Upstream's ``litdata.streaming.dataset`` import path."""

from litdata_stream import StreamingDataset

__all__ = ["StreamingDataset"]
