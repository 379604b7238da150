"""docs/optimize.md's custom ``Encryption`` recipe, run as written: the class upstream's docs describe
(``algorithm``, ``encrypt``, ``decrypt``, ``state_dict``, ``save``, ``load``; no ``level``, and a
``state_dict`` without the algorithm) optimizes and reads back."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

from tests.support.zygote import run_python

DOCS = Path(__file__).resolve().parents[1] / "docs" / "optimize.md"


def _recipe() -> str:
    """The first python block of the "## Encryption" section, verbatim."""
    section = DOCS.read_text().split("\n## Encryption\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, f"{DOCS}: no python block in its Encryption section"
    return found.group(1)


def test_custom_encryption_recipe_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "recipe.py").write_text(_recipe())
    done = run_python([str(tmp_path / "recipe.py")], env=dict(os.environ), cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = done.stdout.strip().splitlines()[-1]
    assert ast.literal_eval(printed) == [{"index": i, "value": i**2} for i in range(5)]
    config = json.loads((tmp_path / "xor_data" / "index.json").read_text())["config"]
    assert config["encryption"] == {"key_id": json.loads((tmp_path / "xor.json").read_text())["key_id"],
                                    "algorithm": "xor-sha256", "level": "sample"}  # fmt: skip
    assert b"value" not in b"".join(p.read_bytes() for p in (tmp_path / "xor_data").glob("*.bin"))
