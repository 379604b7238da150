"""House rules that span packages: one-way imports, no torch in the light packages, pinned APIs."""

from __future__ import annotations

import ast
import subprocess
import sys
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
