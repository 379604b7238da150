"""Exceptions that are two built-in types at once: ours, and the one upstream LitData raises.

An ``except`` clause written for upstream keeps working, and the type still says what went wrong.
"""

from __future__ import annotations

__all__ = ["NotAStreamingDatasetError", "NotCallableError"]


class NotAStreamingDatasetError(TypeError, RuntimeError):
    """Something that is not a streaming dataset was given (a ``RuntimeError`` as upstream raises)."""


class NotCallableError(TypeError, ValueError):
    """A ``transform`` that is not callable (a ``ValueError`` as upstream raises)."""
