"""Upstream's ``litdata.streaming.item_loader`` import path."""

from litdata_format import BaseItemLoader, PyTreeLoader, TokensLoader

__all__ = ["BaseItemLoader", "PyTreeLoader", "TokensLoader"]
