"""Upstream's ``litdata.streaming.writer`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_format import BinaryWriter as BinaryWriter
    from litdata_stream import index_parquet_dataset as index_parquet_dataset

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
