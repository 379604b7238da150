"""One meaning per module name across the workspace: a name read in a traceback or an import says which module.

Every module and subpackage of every package (``__init__`` and ``__main__`` aside; a subpackage counts
by its folder's name) is listed by its last name; two modules sharing one, in two packages or two
folders of one, are refused unless listed in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALLOWED = {
    "internal": "each package's API for its sibling packages: one role, named once by the house rule",
    "serializers": "litdata.streaming.serializers is upstream's path, re-exporting litdata_format.serializers",
    "_pytree": "litdata.utilities._pytree is upstream's path, re-exporting litdata_format's pytree",
    "dataset": "litdata.streaming.dataset and litdata.raw.dataset are both upstream's paths",
    "_cli": "each tool's command line (litdata's and litracer's), which share no code or reader",
    "_key_index": "the key index: its file format in litdata_format, its building and publishing in litdata_prep",
    "combined": "litdata.streaming.combined is upstream's path, re-exporting litdata_stream's CombinedStreamingDataset",
    "parallel": "litdata.streaming.parallel is upstream's path, re-exporting litdata_stream's ParallelStreamingDataset",
}


def module_names(root: Path = ROOT) -> dict[str, list[str]]:
    """Each module name -> the dotted modules of the workspace's packages bearing it."""
    found: dict[str, list[str]] = defaultdict(list)
    for src in sorted([*root.glob("packages/*/src"), *root.glob("tools/*/src")]):
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src).with_suffix("").parts
            if parts[-1] in ("__init__", "__main__"):
                parts = parts[:-1]
                if len(parts) < 2:  # a package's own __init__: its name is the distribution's
                    continue
            found[parts[-1]].append(".".join(parts))
    return found


def collisions(names: dict[str, list[str]]) -> list[str]:
    return [f"{name}: {', '.join(modules)}" for name, modules in sorted(names.items()) if len(modules) > 1]


def test_no_two_modules_share_a_name() -> None:
    found = [line for line in collisions(module_names()) if line.split(":")[0] not in ALLOWED]
    assert not found, (
        "modules sharing a name (rename one after what it holds, or add it to ALLOWED with the reason):\n"
        + "\n".join(found)
    )


def test_every_allowance_is_still_needed() -> None:
    names = module_names()
    unneeded = [name for name in ALLOWED if len(names.get(name, [])) < 2]
    assert not unneeded, f"no longer shared: drop them from ALLOWED: {unneeded}"


def test_a_shared_name_is_found_in_folders_and_packages(tmp_path: Path) -> None:
    for module in ("packages/a/src/pkg_a/_plan.py", "packages/b/src/pkg_b/_cache/_plan.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    for module in ("packages/a/src/pkg_a/__init__.py", "packages/b/src/pkg_b/_cache/__init__.py"):
        (tmp_path / module).write_text("")
    (tmp_path / "tools/c/src/pkg_c").mkdir(parents=True)
    (tmp_path / "tools/c/src/pkg_c/_cache.py").write_text("")
    assert collisions(module_names(tmp_path)) == [
        "_cache: pkg_b._cache, pkg_c._cache",
        "_plan: pkg_a._plan, pkg_b._cache._plan",
    ]
