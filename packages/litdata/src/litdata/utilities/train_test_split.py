"""Upstream's ``litdata.utilities.train_test_split`` import path."""

from litdata_stream import train_test_split

__all__ = ["train_test_split"]
