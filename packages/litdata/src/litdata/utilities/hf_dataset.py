"""Upstream's ``litdata.utilities.hf_dataset`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_stream import index_hf_dataset as index_hf_dataset

__getattr__, __dir__ = lazy_module(globals())
