"""Upstream's ``litdata.processing`` import path."""

from litdata_prep import map, merge_datasets, optimize

__all__ = ["map", "merge_datasets", "optimize"]
