"""Upstream's ``litdata.raw.dataset`` import path."""

from litdata_raw import StreamingRawDataset

__all__ = ["StreamingRawDataset"]
