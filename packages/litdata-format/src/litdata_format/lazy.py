"""Module attributes loaded on first use (PEP 562), for the litdata packages' ``__init__`` files.

Internal to the litdata packages: each package's ``__init__`` maps its public names to the
submodule defining them and gets its ``__getattr__`` / ``__dir__`` from :func:`lazy_module`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_module"]


def lazy_module(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a module whose names in ``exports`` load on first use.

    Args:
        namespace: the module's ``globals()``; a loaded name is stored there, so it loads once.
        exports: public name -> the module that defines it.
    """
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
