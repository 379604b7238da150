"""Upstream's ``litdata.streaming.item_loader`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_format import BaseItemLoader as BaseItemLoader
    from litdata_format import ParquetLoader as ParquetLoader
    from litdata_format import PyTreeLoader as PyTreeLoader
    from litdata_format import TokensLoader as TokensLoader

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
