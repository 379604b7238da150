"""Module attributes loaded on first use (PEP 562), for the litdata packages' re-exporting modules.

A re-exporting module lists each name once, as an explicit re-export in an ``if TYPE_CHECKING:``
block (``from litdata_format._writer import BinaryWriter as BinaryWriter``), and ends with
``__getattr__, __dir__ = lazy_module(globals())``. Type checkers read the block; at run time
:func:`lazy_module` reads it from the module's source on the first attribute asked for, to build
``__all__`` and import each name's module when the name is first used.
"""

from __future__ import annotations

import _ast
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_module"]


def lazy_module(namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a module whose ``TYPE_CHECKING`` re-exports load on first use.

    The module's ``__all__`` is its re-exported names, plus ``__version__`` if it defines one. A
    loaded name is stored in ``namespace`` (the module's ``globals()``), so it loads once.

    Raises:
        ImportError: (on first use) the ``TYPE_CHECKING`` block holds something other than
            ``from module import name as name`` lines.
    """
    module_name: str = namespace["__name__"]
    found: dict[str, str] = {}  # public name -> the module defining it, once read

    def exports() -> dict[str, str]:
        if not found:
            found.update(_read_exports(namespace["__file__"]))
            namespace["__all__"] = [*found, *(["__version__"] if "__version__" in namespace else [])]
        return found

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            exports()
            return namespace["__all__"]
        source = exports().get(name)
        if source is None:
            value = _submodule(name)
            if value is None:
                raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
            return value  # importing it set it as an attribute of this package
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def _submodule(name: str) -> Any:
        """A public subpackage or module of this package, imported on first use; None if there is none.

        ``import litdata`` then gives ``litdata.streaming`` and ``litdata.utilities``, as an
        upstream LitData whose ``__init__`` imports them eagerly does.
        """
        if name.startswith("_") or "__path__" not in namespace:
            return None
        try:
            return importlib.import_module(f"{module_name}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{module_name}.{name}":
                raise  # the submodule exists but something it imports is missing: say so
            return None

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports()))

    return __getattr__, __dir__


def _read_exports(path: str) -> dict[str, str]:
    """Public name -> the module defining it, from the ``if TYPE_CHECKING:`` block of the module at ``path``."""
    # _ast (built in) rather than ast, and open() rather than pathlib: either import costs more than this read.
    with open(path, encoding="utf-8") as file:
        tree = compile(file.read(), path, "exec", _ast.PyCF_ONLY_AST)
    exports: dict[str, str] = {}
    for node in tree.body if isinstance(tree, _ast.Module) else []:
        if not (isinstance(node, _ast.If) and isinstance(node.test, _ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, _ast.ImportFrom) or statement.module is None or statement.level:
                raise ImportError(
                    f"{path}:{statement.lineno}: only `from package.module import name as name` lines "
                    "may stand in the TYPE_CHECKING block of a lazy module"
                )
            for alias in statement.names:
                if alias.asname != alias.name:  # type checkers take only `name as name` for a re-export
                    raise ImportError(
                        f"{path}:{statement.lineno}: write `{alias.name} as {alias.name}` (an explicit re-export, "
                        "which type checkers and lazy_module both read; to rename, define the name in a module)"
                    )
                exports[alias.name] = statement.module
    return exports
