"""Upstream's ``litdata.streaming.dataloader`` import path."""

from litdata_stream import StreamingDataLoader

__all__ = ["StreamingDataLoader"]
