"""The docs site builds, offline, with warnings as errors, and holds the API reference.

``mkdocs build --strict`` (mkdocs.yml): every page of docs/ is in the nav, every link and anchor
resolves, and every docstring the API reference renders parses (a warning fails the build). The
build reads the packages' source (mkdocstrings), fetches nothing, and takes seconds.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("litdata_format", "litdata_io", "litdata_stream", "litdata_raw", "litdata_prep", "litracer")


def test_the_site_builds_strict_with_the_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)]
    done = subprocess.run(build, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert {p.parent.name for p in site.glob("*/index.html")} == pages - {"index"}
    # each package's public API, every name of its __all__, rendered from the docstrings
    api = (site / "api" / "index.html").read_text()
    rendered = set(re.findall(r'id="((?:litdata_\w+|litracer)\.\w+)"', api))
    for package in PACKAGES:
        names = {f"{package}.{n}" for n in importlib.import_module(package).__all__ if n != "__version__"}
        assert names <= rendered, f"{package}: not in the API reference: {sorted(names - rendered)}"
    # a link from docs/ to another file of the repository points at it on the repository
    repo = re.search(r"^repo_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert repo is not None
    assert (
        f'href="{repo[1]}/blob/main/CONTRIBUTING.md#the-soak-test"' in (site / "streaming" / "index.html").read_text()
    )
