"""Upstream's ``litdata.streaming.writer`` import path."""

from litdata_format import BinaryWriter

__all__ = ["BinaryWriter"]
