"""Upstream's ``litdata.raw`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_raw import FileMetadata as FileMetadata
    from litdata_raw import StreamingRawDataset as StreamingRawDataset

__getattr__, __dir__ = lazy_module(globals())
