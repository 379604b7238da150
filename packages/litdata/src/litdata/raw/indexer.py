"""Upstream's ``litdata.raw.indexer`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_raw import BaseIndexer as BaseIndexer
    from litdata_raw import FileIndexer as FileIndexer
    from litdata_raw import FileMetadata as FileMetadata

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
