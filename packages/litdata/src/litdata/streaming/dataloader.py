"""Upstream's ``litdata.streaming.dataloader`` import path (and the loader's watchdog warning and stats)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_stream import LoaderStallWarning as LoaderStallWarning
    from litdata_stream import LoaderStats as LoaderStats
    from litdata_stream import StreamingDataLoader as StreamingDataLoader

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
