"""Upstream's ``litdata.streaming.dataset_update`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_prep import DatasetUpdate as DatasetUpdate
    from litdata_prep import dataset_update as dataset_update

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
