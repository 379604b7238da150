"""Upstream's ``litdata.streaming.collate`` import path."""

from litdata_stream import litdata_collate

__all__ = ["litdata_collate"]
