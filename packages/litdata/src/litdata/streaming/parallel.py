"""Upstream's ``litdata.streaming.parallel`` import path."""

from litdata_stream import ParallelStreamingDataset

__all__ = ["ParallelStreamingDataset"]
