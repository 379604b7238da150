"""Upstream's ``litdata.streaming.item_loader`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_format import BaseItemLoader as BaseItemLoader
    from litdata_format import ParquetLoader as ParquetLoader
    from litdata_format import PyTreeLoader as PyTreeLoader
    from litdata_format import TokensLoader as TokensLoader

__getattr__, __dir__ = lazy_module(globals())
