"""Type guards for the loosely typed values the package reads: decoded JSON and users' dicts.

``isinstance(value, dict)`` leaves the keys and values unknown to the type checker; these guards
say what the code relies on (e.g. a dict keyed by strings), the values to be checked where used.
"""

from __future__ import annotations

import os
from typing import Any, TypeGuard

__all__ = ["is_any_dict", "is_any_list", "is_any_tuple", "is_bytes_like", "is_path_like", "is_str_dict"]


def is_str_dict(value: object) -> TypeGuard[dict[str, Any]]:
    """True when ``value`` is a dict; its keys are taken to be strings and its values are not checked."""
    return isinstance(value, dict)


def is_any_list(value: object) -> TypeGuard[list[Any]]:
    """True when ``value`` is a list; its items are not checked."""
    return isinstance(value, list)


def is_path_like(value: object) -> TypeGuard[os.PathLike[str] | os.PathLike[bytes]]:
    """True when ``value`` is an ``os.PathLike`` (a ``pathlib.Path``, ...), so ``os.fspath`` takes it."""
    return isinstance(value, os.PathLike)


def is_any_tuple(value: object) -> TypeGuard[tuple[Any, ...]]:
    """True when ``value`` is a tuple (a namedtuple too); its items are not checked."""
    return isinstance(value, tuple)


def is_any_dict(value: object) -> TypeGuard[dict[Any, Any]]:
    """True when ``value`` is a dict whose keys may be more than strings (a graph's edge-type tuples)."""
    return isinstance(value, dict)


def is_bytes_like(value: object) -> TypeGuard[bytes | bytearray | memoryview]:
    """True when ``value`` is bytes, a bytearray or a memoryview, so ``bytes(value)`` copies it."""
    return isinstance(value, (bytes, bytearray, memoryview))
