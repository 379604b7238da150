"""Upstream's ``litdata.streaming`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_format import TokensLoader as TokensLoader
    from litdata_stream import Cache as Cache
    from litdata_stream import CombinedStreamingDataset as CombinedStreamingDataset
    from litdata_stream import ParallelStreamingDataset as ParallelStreamingDataset
    from litdata_stream import StreamingDataLoader as StreamingDataLoader
    from litdata_stream import StreamingDataset as StreamingDataset

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
