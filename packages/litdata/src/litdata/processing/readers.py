"""Upstream's ``litdata.processing.readers`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_prep import BaseReader as BaseReader
    from litdata_prep import ParquetReader as ParquetReader

__getattr__, __dir__ = lazy_module(globals())
