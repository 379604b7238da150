"""Upstream's ``litdata.utilities`` package path (its modules are attributes on first use, as upstream's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
