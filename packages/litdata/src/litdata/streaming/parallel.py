"""Upstream's ``litdata.streaming.parallel`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_stream import ParallelStreamingDataset as ParallelStreamingDataset

__getattr__, __dir__ = lazy_module(globals())
