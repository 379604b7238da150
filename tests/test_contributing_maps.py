"""CONTRIBUTING.md's maps cite the code by name: every name they cite must exist where they say.

The maps are tables whose first cell names objects and their module (`` `Name` (`_module`) ``);
the other cells cite classes, members (`` `Class.method` ``), private modules and functions, and
dotted paths (`` `litdata_io._processes._process` ``). Each is looked up in the source with ``ast`` (nothing is
imported), so renaming a class or moving it to another module fails here naming the row.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
# The sections holding maps, and the package a bare `_module` of theirs belongs to.
MAP_SECTIONS = {
    "Reading a dataset": "litdata_stream",
    "A prep job": "litdata_prep",
    "Processes, forks and obstore": "litdata_io",
}
_TICKED = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$")
_FIRST_CELL = re.compile(r"((?:`[^`]+`(?:,\s*)?)+)\s*\(`([^`]+)`\)")


@dataclass
class Module:
    names: set[str] = field(default_factory=set[str])  # defined at the top level
    members: dict[str, set[str]] = field(default_factory=dict[str, set[str]])  # class -> attributes


def _members(node: ast.ClassDef) -> set[str]:
    found: set[str] = set()
    for item in ast.walk(node):
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            found.add(item.target.id)
        elif isinstance(item, ast.Assign | ast.AnnAssign):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found.add(target.id)
                elif isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "self":
                    found.add(target.attr)
    return found


def _read_module(path: Path) -> Module:
    module = Module()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            module.names.add(node.name)
            module.members[node.name] = _members(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            module.names.add(node.name)
        elif isinstance(node, ast.Assign):
            module.names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            module.names.add(node.target.id)
    return module


def workspace_modules() -> dict[str, Module]:
    """Every module of the workspace's packages by dotted name (``litdata_io._processes._process``)."""
    modules: dict[str, Module] = {}
    for src in [*ROOT.glob("packages/*/src"), *ROOT.glob("tools/*/src")]:
        for path in src.rglob("*.py"):
            parts = path.relative_to(src).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = _read_module(path)
    return modules


class Lookup:
    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules

    def module(self, package: str, name: str) -> str | None:
        """The dotted module a map's `_module` or `package._module` means, or None."""
        for dotted in (name, f"{package}.{name}"):
            if dotted in self.modules:
                return dotted
        return None

    def defined_in(self, dotted: str, name: str) -> bool:
        head, _, member = name.partition(".")
        module = self.modules[dotted]
        if not member:
            return head in module.names
        return member in module.members.get(head, set())

    def anywhere(self, name: str, package: str, row_classes: list[str]) -> bool:
        """Whether a name cited in a map's cell exists in the workspace."""
        name = name.removesuffix("()")
        if name.startswith("litdata"):  # a dotted path: a module, or a name in one
            module, _, rest = name.rpartition(".")
            if name in self.modules:
                return True
            while module and module not in self.modules:
                module, _, head = module.rpartition(".")
                rest = f"{head}.{rest}"
            return bool(module) and self.defined_in(module, rest)
        head, _, member = name.partition(".")
        if member and not head.startswith("_") and head[0].islower():
            return True  # another library's (`dataclasses.replace`)
        if member:  # Class.member or _module.Name
            if head.startswith("_") and self.module(package, head):
                return self.defined_in(self.module(package, head) or "", member)
            return any(member in m.members.get(head, set()) for m in self.modules.values())
        if head.startswith("_"):  # a private module, function or member
            if self.module(package, head):
                return True
            in_package = (m for dotted, m in self.modules.items() if dotted.startswith(package))
            if any(head in m.names for m in in_package):
                return True
            return any(head in m.members.get(c, set()) for c in row_classes for m in self.modules.values())
        if head[0].isupper():  # a class or another top-level name
            return any(head in m.names for m in self.modules.values())
        return True  # a lowercase word: an argument, a torch call; not ours to check


def map_rows(text: str) -> list[tuple[str, str]]:
    """(package, row) for each table row of the map sections."""
    rows: list[tuple[str, str]] = []
    package = None
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            package = next((p for s, p in MAP_SECTIONS.items() if title.startswith(s)), None)
        elif package and line.startswith("|") and not set(line) <= set("|-: "):
            rows.append((package, line))
    return rows


def problems(text: str, lookup: Lookup) -> list[str]:
    found: list[str] = []
    for package, row in map_rows(text):
        cells = [c.strip() for c in row.strip("|").split("|")]
        row_classes: list[str] = []
        for names, module_name in _FIRST_CELL.findall(cells[0]):
            dotted = lookup.module(package, module_name)
            for name in _TICKED.findall(names):
                row_classes.append(name)
                if dotted is None:
                    found.append(f"{cells[0]}: no module {module_name!r} in {package}")
                elif not lookup.defined_in(dotted, name):
                    found.append(f"{cells[0]}: {name} is not defined in {dotted}")
        for cell in cells[1:] if row_classes else cells:
            for name in _TICKED.findall(cell):
                if _NAME.match(name) and not lookup.anywhere(name, package, row_classes):
                    found.append(f"{cells[0]}: {name!r} names nothing in the code")
    return found


def test_every_name_the_maps_cite_exists_where_they_say() -> None:
    text = CONTRIBUTING.read_text()
    assert len(map_rows(text)) >= 25, "the map sections of CONTRIBUTING.md were not found"
    assert problems(text, Lookup(workspace_modules())) == []


def test_a_renamed_name_is_reported() -> None:
    lookup = Lookup(workspace_modules())
    page = (
        "### Reading a dataset\n\n| object | owns | does not |\n|---|---|---|\n"
        "| `StreamingDataset` (`_dataset`) | `StreamingReader.read_stretch`, `ReadState` | x |\n"
        "| `StreamingDatasetRenamed` (`_dataset`) | `StreamingReader.read_strech`, `_datset`, `NoSuchClass` | x |\n"
        "| `Job` (`_dataset`) | `litdata_io._processes._process.PerProcess.get`, `litdata_io._nothing` | x |\n"
    )
    assert problems(page, lookup) == [
        "`StreamingDatasetRenamed` (`_dataset`): StreamingDatasetRenamed is not defined in litdata_stream._dataset",
        "`StreamingDatasetRenamed` (`_dataset`): 'StreamingReader.read_strech' names nothing in the code",
        "`StreamingDatasetRenamed` (`_dataset`): '_datset' names nothing in the code",
        "`StreamingDatasetRenamed` (`_dataset`): 'NoSuchClass' names nothing in the code",
        "`Job` (`_dataset`): Job is not defined in litdata_stream._dataset",
        "`Job` (`_dataset`): 'litdata_io._nothing' names nothing in the code",
    ]
