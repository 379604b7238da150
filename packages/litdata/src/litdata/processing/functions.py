"""Upstream's ``litdata.processing.functions`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_prep import map as map
    from litdata_prep import merge_datasets as merge_datasets
    from litdata_prep import optimize as optimize
    from litdata_prep import walk as walk

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
