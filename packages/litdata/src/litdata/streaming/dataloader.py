"""Upstream's ``litdata.streaming.dataloader`` import path (and the loader's watchdog warning and stats)."""

from litdata_stream import LoaderStallWarning, LoaderStats, StreamingDataLoader

__all__ = ["LoaderStallWarning", "LoaderStats", "StreamingDataLoader"]
