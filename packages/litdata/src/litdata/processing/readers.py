"""Upstream's ``litdata.processing.readers`` import path."""

from litdata_prep import BaseReader, ParquetReader

__all__ = ["BaseReader", "ParquetReader"]
