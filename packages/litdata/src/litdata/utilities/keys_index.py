"""Upstream's ``litdata.utilities.keys_index`` import path (``build_keys_index``)."""

from litdata_prep import build_keys_index

__all__ = ["build_keys_index"]
