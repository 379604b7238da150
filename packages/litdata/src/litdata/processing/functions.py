"""Upstream's ``litdata.processing.functions`` import path."""

from litdata_prep import map, merge_datasets, optimize, walk

__all__ = ["map", "merge_datasets", "optimize", "walk"]
