"""Upstream's ``litdata.streaming.dataset`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_stream import StreamingDataset as StreamingDataset

__getattr__, __dir__ = lazy_module(globals())
