"""Upstream's ``litdata.streaming.combined`` import path."""

from litdata_stream import CombinedStreamingDataset

__all__ = ["CombinedStreamingDataset"]
