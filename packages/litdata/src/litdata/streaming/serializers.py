"""Upstream's ``litdata.streaming.serializers`` import path."""

from litdata_format import Serializer

__all__ = ["Serializer"]
