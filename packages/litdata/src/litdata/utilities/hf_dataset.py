"""Upstream's ``litdata.utilities.hf_dataset`` import path."""

from litdata_stream import index_hf_dataset

__all__ = ["index_hf_dataset"]
