"""Upstream's ``litdata.raw`` import path."""

from litdata_raw import FileMetadata, StreamingRawDataset

__all__ = ["FileMetadata", "StreamingRawDataset"]
