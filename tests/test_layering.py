"""House rules that span packages: one-way imports, no torch in the light packages, pinned APIs."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# format <- io <- stream <- {raw, prep} <- litdata; litracer stands alone.
RANK = {"litdata_format": 0, "litdata_io": 1, "litdata_stream": 2, "litdata_raw": 3, "litdata_prep": 3, "litdata": 4}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _sources(package: str) -> list[Path]:
    return sorted(ROOT.glob(f"packages/*/src/{package}/**/*.py"))


@pytest.mark.parametrize("package", sorted(RANK))
def test_no_upward_imports(package: str) -> None:
    bad = []
    for path in _sources(package):
        for other in _imported_packages(path) & RANK.keys():
            if other != package and RANK[other] >= RANK[package]:
                bad.append(f"{path.relative_to(ROOT)} imports {other}")
    assert not bad, "a lower package imports a higher (or sibling) one:\n" + "\n".join(bad)


def test_litracer_imports_no_package() -> None:
    bad = [
        str(path.relative_to(ROOT))
        for path in ROOT.glob("tools/litracer/src/**/*.py")
        if _imported_packages(path) & RANK.keys()
    ]
    assert not bad


@pytest.mark.parametrize("module", ["litdata_format", "litdata_io"])
def test_light_packages_do_not_import_torch(module: str) -> None:
    heavy = ("torch", "PIL", "pyarrow", "cryptography", "obstore", "fsspec")
    code = f"import sys, {module}; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# Imports used only on objects of a library the caller already has (a torch tensor, a PyG graph):
# whoever holds one has the library, so the package declares no dependency on it.
USED_WHEN_PRESENT = {"litdata-format": {"torch", "torch-geometric"}, "litdata-stream": {"torch-geometric"}}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA = re.compile(r"""extra == ['"]([^'"]+)['"]""")
# The workspace's packages, from their folders (packages/litdata-io, tools/litracer).
WORKSPACE = sorted(p.parent for p in [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("tools/*/pyproject.toml")])


def _dist(requirement: str) -> str:
    match = _NAME.match(requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match[0]).lower()


def _requirements(name: str) -> tuple[set[str], dict[str, set[str]]]:
    """The distributions ``name`` requires, and those of each of its extras, as installed (from its pyproject)."""
    required: set[str] = set()
    extras: dict[str, set[str]] = {}
    for requirement in requires(name) or []:
        extra = _EXTRA.search(requirement)
        (extras.setdefault(extra[1], set()) if extra else required).add(_dist(requirement))
    return required, extras


def _optional_imports(path: Path) -> set[tuple[str, str]]:
    """``(module, extra)`` of every ``import_optional("module", "extra", ...)`` call in ``path``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "import_optional":
            module, extra = (arg.value for arg in node.args[:2] if isinstance(arg, ast.Constant))
            found.add((str(module), str(extra)))
    return found


@pytest.mark.parametrize("folder", WORKSPACE, ids=lambda p: p.name)
def test_declared_dependencies_match_the_imports(folder: Path) -> None:
    """Every third-party import is declared (as a dependency or in an extra), and every dependency is
    imported: the package works installed alone, and installs nothing it does not use."""
    name = folder.name
    required, extras = _requirements(name)
    distributions = {module: {_dist(d) for d in dists} for module, dists in packages_distributions().items()}
    distributions.update({p.name.replace("-", "_"): {p.name} for p in WORKSPACE})  # editable installs
    own = {p.name for p in (folder / "src").iterdir() if p.is_dir()}
    sources = sorted((folder / "src").rglob("*.py"))
    imported: set[str] = set()
    for path in sources:
        for module in _imported_packages(path) - own - set(sys.stdlib_module_names):
            assert module in distributions, f"{path.relative_to(ROOT)} imports {module}, which no installed package has"
            imported |= distributions[module]
    undeclared = imported - required.union(*extras.values()) - USED_WHEN_PRESENT.get(name, set())
    assert not undeclared, f"{name} imports {sorted(undeclared)} without declaring them in {folder}/pyproject.toml"
    unused = required - imported
    assert not unused, f"{name} declares {sorted(unused)} but never imports them: drop them from its pyproject.toml"
    for path in sources:
        for module, extra in _optional_imports(path):
            dists = distributions[module.split(".")[0]]
            assert dists & extras.get(extra, set()), f'{path.relative_to(ROOT)} names extra "{extra}" for {module}'


def _module_imports(package_dir: Path, type_only: bool = False) -> dict[str, set[str]]:
    """For each module of the package in ``package_dir``, the package's modules it imports (at the top or
    inside a function; under ``if TYPE_CHECKING:``, which never runs, only with ``type_only``). ``from pkg
    import _sub`` counts as importing ``pkg._sub``; any other name imported from ``pkg`` as importing
    ``pkg/__init__``."""

    def name_of(path: Path) -> str:
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(path): path for path in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skipped = {
            id(inner)
            for node in ast.walk(tree)
            if not type_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for statement in node.body
            for inner in ast.walk(statement)
        }
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            else:
                continue
            for target in targets:
                module = target
                while module and module not in modules:  # import a.b.c -> the longest module of the package
                    module = module.rpartition(".")[0]
                if module and module != name:
                    found.add(module)
        graph[name] = found
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in import order, the first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state and (found := visit(other)) is not None:
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


PACKAGE_DIRS = sorted(ROOT.glob("packages/*/src/*/__init__.py")) + sorted(ROOT.glob("tools/*/src/*/__init__.py"))


@pytest.mark.parametrize("init", PACKAGE_DIRS, ids=lambda p: p.parent.name)
def test_no_import_cycles_inside_a_package(init: Path) -> None:
    """Modules of one package import each other one way, so each can be read (and imported) after the
    ones it uses; a function-level import that only hides a cycle counts as one."""
    cycle = _cycle(_module_imports(init.parent))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("init", PACKAGE_DIRS, ids=lambda p: p.parent.name)
def test_no_import_cycles_even_for_type_checkers(init: Path) -> None:
    """Nor under ``if TYPE_CHECKING:``: a type a module names only for its annotations still makes the two
    modules one to read (a lower layer that names a higher one's type knows it)."""
    cycle = _cycle(_module_imports(init.parent, type_only=True))
    assert cycle is None, "import cycle (type-only imports counted): " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_function_level_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg import _b as b\n")
    (package / "_a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg._b import B\n")
    (package / "_b.py").write_text("from pkg import _a\n")
    assert _cycle(_module_imports(package)) is None
    assert _cycle(_module_imports(package, type_only=True)) == ["pkg._b", "pkg._a", "pkg._b"]
    (package / "_a.py").write_text("def f():\n    from pkg._b import B\n")
    assert _cycle(_module_imports(package)) == ["pkg._b", "pkg._a", "pkg._b"]


# The packages' APIs: each package exports its users' API, documented in its README under "## Public API";
# ``<package>.internal`` exports what its sibling packages need beyond that; ``_modules`` stay inside.
USER_PACKAGES = ["litdata_format", "litdata_io", "litdata_stream", "litdata_raw", "litdata_prep"]
_DOCUMENTED_NAME = re.compile(r"`([A-Za-z_]\w*)`")


def _documented_api(package: str) -> set[str]:
    """The names listed in the paragraph under ``## Public API`` of the package's README."""
    readme = ROOT / "packages" / package.replace("_", "-") / "README.md"
    section = readme.read_text().split("## Public API\n", 1)[1].strip().split("\n\n", 1)[0]
    return set(_DOCUMENTED_NAME.findall(section)) - {"__all__"}


@pytest.mark.parametrize("package", USER_PACKAGES)
def test_the_user_api_is_the_documented_one(package: str) -> None:
    module = importlib.import_module(package)
    assert len(module.__all__) == len(set(module.__all__)), module.__all__
    assert set(module.__all__) - {"__version__"} == _documented_api(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


@pytest.mark.parametrize("package", ["litdata_format", "litdata_io"])
def test_the_sibling_api_is_apart_from_the_user_api(package: str) -> None:
    user, internal = importlib.import_module(package), importlib.import_module(f"{package}.internal")
    assert internal.__all__
    assert not set(internal.__all__) & set(user.__all__)
    for name in internal.__all__:
        assert getattr(internal, name) is not None, name


@pytest.mark.parametrize("package", sorted(RANK))
def test_packages_use_each_other_only_through_their_public_modules(package: str) -> None:
    """Another package's ``_modules`` are its own: a sibling imports ``pkg`` or ``pkg.<public module>``."""
    bad = []
    for path in _sources(package):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for name in names:
                top, *rest = name.split(".")
                if top in RANK and top != package and any(part.startswith("_") for part in rest):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not bad, "\n".join(bad)
