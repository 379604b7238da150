"""Upstream's ``litdata.streaming.item_loader`` import path."""

from litdata_format import BaseItemLoader, ParquetLoader, PyTreeLoader, TokensLoader

__all__ = ["BaseItemLoader", "ParquetLoader", "PyTreeLoader", "TokensLoader"]
