"""Upstream's ``litdata.streaming.cache`` import path."""

from litdata_io import Dir
from litdata_stream import Cache

__all__ = ["Cache", "Dir"]
