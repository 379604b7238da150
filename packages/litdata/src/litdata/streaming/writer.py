"""Upstream's ``litdata.streaming.writer`` import path."""

from litdata_format import BinaryWriter
from litdata_stream import index_parquet_dataset

__all__ = ["BinaryWriter", "index_parquet_dataset"]
