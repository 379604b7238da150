"""Upstream's ``litdata.streaming.resolver`` import path."""

from litdata_io import Dir, resolve_dir

__all__ = ["Dir", "resolve_dir"]
