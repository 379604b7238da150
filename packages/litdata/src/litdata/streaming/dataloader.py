"""Upstream's ``litdata.streaming.dataloader`` import path (and the loader's watchdog warning and stats)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_stream import LoaderStallWarning as LoaderStallWarning
    from litdata_stream import LoaderStats as LoaderStats
    from litdata_stream import StreamingDataLoader as StreamingDataLoader

__getattr__, __dir__ = lazy_module(globals())
