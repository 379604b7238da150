"""Upstream's ``litdata.processing.data_processor`` import path (the queue sentinel)."""

from litdata_prep import ALL_DONE

__all__ = ["ALL_DONE"]
