"""The public API of the packages is documented: a docstring everywhere, every argument in Args:.

ruff's pydocstyle rules only see a module's own names, and every public name of these packages
lives in a private module and is re-exported, so this walks each package's ``__all__`` instead.
A method without a docstring of its own inherits its base class's (as ``help()`` shows it).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from typing import Any

import pytest

PACKAGES = ("litdata_format", "litdata_io", "litracer", "litdata_raw", "litdata_prep", "litdata_stream", "litdata")


def _methods(cls: type) -> Iterator[tuple[str, Any]]:
    for name in dir(cls):
        if name.startswith("_"):
            continue
        raw = inspect.getattr_static(cls, name)
        function = raw.fget if isinstance(raw, property) else getattr(raw, "__func__", raw)
        # Methods this project defines, not those inherited from the standard library (Exception, ...).
        if inspect.isfunction(function) and function.__module__.split(".")[0] in PACKAGES:
            yield name, getattr(cls, name)


def _public(package: str) -> Iterator[tuple[str, Any]]:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) and value.__module__.split(".")[0] in PACKAGES:
            yield f"{package}.{name}", value
            for method, bound in _methods(value):
                yield f"{package}.{name}.{method}", bound
        elif inspect.isfunction(value):
            yield f"{package}.{name}", value


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_class_function_and_method_has_a_docstring(package: str) -> None:
    undocumented = [name for name, value in _public(package) if not inspect.getdoc(value)]
    assert not undocumented, f"public names without a docstring: {undocumented}"


def _argument_names(function: Any, method: bool) -> list[str]:
    names = []
    for parameter in inspect.signature(function).parameters.values():
        if method and parameter.name in ("self", "cls"):
            continue
        prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
        names.append(prefix + parameter.name)
    return names


_TWIN = re.compile(r"^Sync twin of :meth:`(\w+)`")


@pytest.mark.parametrize("package", PACKAGES)
def test_public_functions_and_methods_document_each_argument(package: str) -> None:
    missing = []
    for name, value in _public(package):
        function = value.fget if isinstance(value, property) else value
        if not (inspect.isfunction(function) or inspect.ismethod(function)):
            continue
        doc = inspect.getdoc(function) or ""
        twin = _TWIN.match(doc)
        if twin:  # a sync method documented by its async twin, which takes the same arguments
            owner = importlib.import_module(package)
            for part in name.split(".")[1:-1]:
                owner = getattr(owner, part)
            doc = inspect.getdoc(getattr(owner, twin.group(1))) or ""
        section = doc.split("Args:", 1)[1] if "Args:" in doc else ""
        documented = set(re.findall(r"^\s+(\**\w+)(?: \(.*?\))?:", section, re.MULTILINE))
        absent = [arg for arg in _argument_names(function, name.count(".") > 1) if arg not in documented]
        if absent:
            missing.append(f"{name}: {', '.join(absent)}")
    assert not missing, "arguments missing from the Args: section:\n" + "\n".join(missing)
