"""No module reaches into another module's private attributes (issue 15's bar).

A private attribute (``x._name``, not a dunder) may be read or written only on ``self``, ``cls``
or ``super()``, or where a class of the same module defines it (a module may know its own
classes' insides: ``clone._read`` in ``StreamingDataset.subset``). Everything else goes through
public members: between modules, the read path talks through ``_protocol.LoaderDataset`` and the
sub-dataset methods, never through private fields. The check is syntactic (the AST), so it
also counts ``getattr(x, "_name")``, ``vars(x)["_name"]`` and ``x.__dict__["_name"]``, and
``from m import _name`` of another module's private function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("tools/*/src/**/*.py")])

# Public API that the standard library spells with an underscore.
DOCUMENTED = {
    "_fields": "namedtuple: the field names",
    "_replace": "namedtuple: a copy with fields replaced",
    "_asdict": "namedtuple: a dict of the fields",
    "_make": "namedtuple: build from an iterable",
    "_exit": "os._exit: leave without cleanup (a forked child)",
}

# Internals of other libraries, read where they offer no public way; each falls back when absent.
FOREIGN = {
    ("litdata_io/_processes/_forkserver.py", "_forkserver"): "multiprocessing: is this process's forkserver running",
    ("litdata_io/_processes/_forkserver.py", "_forkserver_pid"): "multiprocessing: the running forkserver's pid",
    ("litdata_io/_processes/_forkserver.py", "_preload_modules"): "multiprocessing: the forkserver's preload list",
    (
        "litdata_io/_processes/_forkserver.py",
        "_inheriting",
    ): "multiprocessing: what spawn sets while importing the script",
    ("litdata_io/_storage/_aws_boto3.py", "_expiry_time"): "botocore: when refreshable credentials expire",
    ("litdata_io/_storage/_options.py", "_user_provided_options"): "botocore Config: the options the user set",
    ("litdata_format/_media/_av_serializers.py", "_hf_encoded"): "HF datasets: a decoder's encoded bytes",
    ("litdata_format/_media/_av_serializers.py", "_litdata_encoded"): "upstream LitData: a decoder's encoded bytes",
    ("litdata_stream/_dataloader.py", "_worker_result_queue"): "torch DataLoader: the workers' result pipe",
    ("litdata_stream/_dataloader.py", "_reader"): "multiprocessing Queue: the pipe's reading end",
}


def _private(name: object) -> bool:
    return isinstance(name, str) and name.startswith("_") and not name.startswith("__")


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _owned(tree: ast.Module) -> set[str]:
    """The private names the classes of this module define: methods, class attributes, and what
    their methods assign on ``self`` / ``cls``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.Assign):
                names.update(t.id for t in item.targets if isinstance(t, ast.Name))
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
        for inner in ast.walk(node):
            targets: list[ast.expr] = []
            if isinstance(inner, ast.Assign):
                targets = list(inner.targets)
            elif isinstance(inner, (ast.AnnAssign, ast.AugAssign)):
                targets = [inner.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Attribute) and _is_self(leaf.value):
                        names.add(leaf.attr)
    return {name for name in names if _private(name)}


def _accesses(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, private name, the expression) of each private access on something not self/cls/super()."""
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _is_self(node.value):
            found.append((node.lineno, node.attr, ast.unparse(node)))
        elif isinstance(node, ast.Call) and node.args and not _is_self(node.args[0]):
            func = node.func
            key = node.args[1] if len(node.args) > 1 else None
            by_name = isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "hasattr", "delattr")
            # vars(x).get("_name") / x.__dict__.pop("_name")
            by_dict = (
                isinstance(func, ast.Attribute)
                and func.attr in ("get", "pop", "setdefault")
                and _namespace_of(func.value) is not None
                and not _is_self(_namespace_of(func.value))  # type: ignore[arg-type]
            )
            if by_dict:
                key = node.args[0]
            if (by_name or by_dict) and isinstance(key, ast.Constant) and _private(key.value):
                found.append((node.lineno, str(key.value), ast.unparse(node)))
        elif isinstance(node, ast.Subscript):
            owner = _namespace_of(node.value)
            key = node.slice
            if owner is not None and not _is_self(owner) and isinstance(key, ast.Constant) and _private(key.value):
                found.append((node.lineno, str(key.value), ast.unparse(node)))
    return found


def _namespace_of(node: ast.expr) -> ast.expr | None:
    """``x`` when ``node`` is ``vars(x)`` or ``x.__dict__``, else None."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and node.args:
        return node.args[0]
    return None


def _imports(tree: ast.Module) -> list[tuple[int, str, str]]:
    """``from m import _name``: another module's private name (private modules themselves are fine)."""
    return [
        (node.lineno, alias.name, f"from {node.module} import {alias.name}")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if _private(alias.name) and not _is_module(f"{node.module}.{alias.name}")
    ]


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module of the workspace (``litdata_io._processes._process``)."""
    parts = dotted.split(".")
    return any(
        path.with_suffix("").parts[-len(parts) :] == tuple(parts) or path.parent.parts[-len(parts) :] == tuple(parts)
        for path in SOURCES
    )


def _where(path: Path) -> str:
    """The module's path under its package's ``src`` (``litdata_io/_processes/_forkserver.py``)."""
    return "/".join(path.parts[len(path.parts) - path.parts[::-1].index("src") :])


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    owned = _owned(tree)
    where = _where(path)
    bad = []
    for line, name, text in _accesses(tree):
        if name in owned or name in DOCUMENTED or (where, name) in FOREIGN:
            continue
        bad.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    bad.extend(f"{path.relative_to(ROOT)}:{line}: {text}" for line, _, text in _imports(tree))
    return bad


def test_no_private_access_across_modules() -> None:
    bad = [line for path in SOURCES for line in _violations(path)]
    assert not bad, (
        "private attributes used outside the module of their class (make a public member, internal to the "
        "litdata packages, or pass what is needed):\n" + "\n".join(bad)
    )


def test_every_allowance_is_still_needed() -> None:
    """An allowance for a foreign internal that is no longer used goes (so the list stays honest)."""
    used = set()
    for path in SOURCES:
        where = _where(path)
        used.update((where, name) for _, name, _ in _accesses(ast.parse(path.read_text(), str(path))))
    assert not set(FOREIGN) - used


@pytest.mark.parametrize(
    ("code", "count"),
    [
        ("class A:\n    def f(self):\n        return self._x\n", 0),
        ("def f(a):\n    return a._x\n", 1),
        ("class A:\n    def __init__(self):\n        self._x = 1\n\ndef f(a):\n    return a._x\n", 0),
        ("def f(a):\n    return getattr(a, '_x', None)\n", 1),
        ("def f(a):\n    return vars(a).get('_x')\n", 1),
        ("def f(a):\n    a.__dict__['_x'] = 1\n", 1),
        ("def f(a):\n    return a._fields\n", 0),
        ("from m import _helper\n", 1),
        ("class A:\n    def f(self):\n        return super()._g()\n", 0),
    ],
)
def test_the_check_itself(tmp_path: Path, code: str, count: int) -> None:
    path = tmp_path / "pkg" / "mod.py"
    path.parent.mkdir()
    path.write_text(code)
    tree = ast.parse(code)
    owned = _owned(tree)
    found = [a for a in _accesses(tree) if a[1] not in owned and a[1] not in DOCUMENTED] + _imports(tree)
    assert len(found) == count, found
