"""What a PyPI user gets: the built wheels' metadata, their READMEs' links, the version scheme.

The wheels are built as CI builds them (``uv build --all-packages --wheel``) and read back: each
carries the LICENSE, valid classifiers, the project's URLs (stated once, in the root
``pyproject.toml``'s ``[tool.litdata]``), authors, the shared version with siblings pinned exactly,
and a README whose links resolve outside the repository (absolute, to files and headings that
exist). ``tests/scripts/install_matrix.py`` installs each by name from a folder of these wheels with PyPI as
index and checks the folder's won; here a folder alone (``--no-index``) is installed from offline.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email import message_from_bytes
from email.message import Message
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from trove_classifiers import classifiers as known_classifiers

import litdata
import litdata_format
import litdata_io
import litdata_prep
import litdata_raw
import litdata_stream
import litracer

ROOT = Path(__file__).resolve().parents[1]
HOME = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["litdata"]
REPO, DOCS = HOME["repository"], HOME["documentation"]
FOLDERS = {
    tomllib.loads(p.read_text())["project"]["name"]: p.parent
    for p in [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("tools/*/pyproject.toml")]
}
# Upstream LitData's latest release on PyPI when this was checked (`pip index versions litdata`, 2026-12-07).
# Ours must be above it so that a resolver offered both (a folder of our wheels and PyPI) picks ours.
UPSTREAM_LATEST = "0.2.76"
# Requirements projects write for upstream 0.2.x, which ours must meet.
UPSTREAM_PINS = (">=0.2.0", ">=0.2.76", "~=0.2.30", "~=0.2.76", "==0.2.*", ">=0.2,<0.3")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_REQUIRED_CLASSIFIERS = ("Development Status :: ", "Programming Language :: Python :: 3.10", "Typing :: Typed")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        ["uv", "build", "--all-packages", "--wheel", "--out-dir", str(dist), "--quiet"], cwd=ROOT, check=True
    )
    built = {_metadata(w)["Name"]: w for w in dist.glob("*.whl")}
    assert sorted(built) == sorted(FOLDERS), built
    return built


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return message_from_bytes(z.read(name))


def test_wheels_carry_license_classifiers_urls_and_authors(wheels: dict[str, Path]) -> None:
    license_text = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License" in license_text and b"Version 2.0" in license_text
    for name, wheel in wheels.items():
        meta = _metadata(wheel)
        assert meta["License-Expression"] == "Apache-2.0", name
        assert meta.get_all("License-File") == ["LICENSE"], name
        with zipfile.ZipFile(wheel) as z:
            licenses = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
            assert len(licenses) == 1 and z.read(licenses[0]) == license_text, f"{name}: no LICENSE in {wheel.name}"
        classifiers = meta.get_all("Classifier") or []
        unknown = set(classifiers) - known_classifiers
        assert not unknown, f"{name}: classifiers PyPI rejects: {sorted(unknown)}"
        for prefix in _REQUIRED_CLASSIFIERS:
            assert any(c.startswith(prefix) for c in classifiers), f"{name}: no {prefix!r} classifier"
        urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
        folder = FOLDERS[name].relative_to(ROOT).as_posix()
        assert urls == {
            "Homepage": REPO,
            "Documentation": DOCS,
            "Source": f"{REPO}/tree/main/{folder}",
            "Issues": f"{REPO}/issues",
        }, name
        assert meta["Author"] or meta["Author-email"], f"{name}: no author"


def test_the_docs_site_names_the_same_home() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert f"\nsite_url: {DOCS}\n" in config and f"\nrepo_url: {REPO}\n" in config


def test_one_version_and_siblings_pinned_exactly(wheels: dict[str, Path]) -> None:
    versions = {name: _metadata(wheel)["Version"] for name, wheel in wheels.items()}
    (version,) = set(versions.values())
    modules = (litdata, litdata_format, litdata_io, litdata_prep, litdata_raw, litdata_stream, litracer)
    assert {m.__name__: m.__version__ for m in modules} == {m.__name__: version for m in modules}
    for name, wheel in wheels.items():
        for line in _metadata(wheel).get_all("Requires-Dist") or []:
            requirement = Requirement(line)
            if requirement.name in wheels and requirement.name != name:  # not its own extras (litdata-prep[all])
                assert str(requirement.specifier) == f"=={version}", f"{name}: {line}"


def test_version_meets_upstream_pins_and_is_above_upstream(wheels: dict[str, Path]) -> None:
    version = Version(_metadata(wheels["litdata"])["Version"])
    assert version > Version(UPSTREAM_LATEST)
    for pin in UPSTREAM_PINS:
        assert version in SpecifierSet(pin), f"litdata {version} does not meet a project's litdata{pin}"
    assert (ROOT / "README.md").read_text().count(str(version)) >= 1, "the README's Versions section names it"


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors of a markdown file (lowercased, punctuation dropped, spaces to hyphens)."""
    slugs = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slugs.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return slugs


def test_readme_links_resolve_on_pypi(wheels: dict[str, Path]) -> None:
    """A README on PyPI has no repository around it: every link is absolute, to a file and heading that exist."""
    for name, wheel in wheels.items():
        description = _metadata(wheel).get_payload()
        assert isinstance(description, str) and description.startswith(f"# {name}"), f"{name}: README not in METADATA"
        links = _LINK.findall(description)
        for target in links:
            assert re.match(r"https?://", target), f"{name}'s README: {target!r} does not resolve on PyPI"
            if not target.startswith(REPO):
                continue
            rest, _, anchor = target.removeprefix(REPO).partition("#")
            path = ROOT / (rest.removeprefix("/blob/main/").removeprefix("/tree/main/") or "README.md")
            assert rest in ("", "/issues") or rest.startswith(("/blob/main/", "/tree/main/")), target
            assert path.exists(), f"{name}'s README links to {target}, but {path.relative_to(ROOT)} does not exist"
            if anchor:
                assert anchor in _anchors(path.read_text()), f"{name}'s README: no heading #{anchor} in {path.name}"


def test_readme_install_table_matches_the_install_matrix() -> None:
    """The README's install table names what tests/scripts/install_matrix.py checks each install has and lacks."""
    from tests.scripts.install_matrix import MATRIX

    rows: dict[str, list[str]] = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("| `lit"):
            rows.setdefault(line.split("|")[1].strip(" `"), line.lower().split("|"))  # the first table: Install
    for smoke in MATRIX:
        _, _, brings, extras, _ = rows[smoke.package]
        for dist in smoke.brings:  # brought by the package, or by the extra the matrix installs it with
            assert dist in brings + extras, f"README: the {smoke.package} row does not say it brings {dist}"
        for dist in smoke.lacks:
            assert dist not in brings, f"README: the {smoke.package} row says it brings {dist}; the install does not"


def test_a_folder_of_wheels_installs_offline(wheels: dict[str, Path], tmp_path: Path) -> None:
    """``pip install --no-index --find-links dist litracer==<version>`` and the installed command runs."""
    version = _metadata(wheels["litracer"])["Version"]
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    dist = wheels["litracer"].parent
    install = ["uv", "pip", "install", "--quiet", "--offline", "--no-index", "--find-links", str(dist)]
    subprocess.run([*install, "--python", str(venv / "bin" / "python"), f"litracer=={version}"], check=True)
    out = subprocess.run([str(venv / "bin" / "litracer"), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"litracer {version}"
