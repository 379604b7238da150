"""Upstream's ``litdata.debugger`` import path: the pipeline tracer (see ``docs/tracing.md``)."""

from litdata_io import enable_tracer

__all__ = ["enable_tracer"]
