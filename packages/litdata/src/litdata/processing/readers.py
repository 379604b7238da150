"""Upstream's ``litdata.processing.readers`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_prep import BaseReader as BaseReader
    from litdata_prep import ParquetReader as ParquetReader

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
