"""A side virtual environment with the real upstream ``litdata==0.2.76``, for compatibility tests.

Built once with uv into ``.side-venvs/`` (ignored by git). torch is pinned to the version of this
environment so uv links it from its cache instead of downloading it again.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_VERSION = "0.2.76"
VENV = ROOT / ".side-venvs" / f"upstream-{UPSTREAM_VERSION}"


def _uv() -> str:
    found = shutil.which("uv")
    if found is None:
        raise RuntimeError("uv is needed to build the upstream side venv: python3 -m pip install uv")
    return found


def upstream_python() -> Path:
    """The side venv's python, building the venv first if it is missing or incomplete."""
    python = VENV / "bin" / "python"
    marker = VENV / ".ready-3"  # bump when the package list changes
    if marker.exists():
        return python
    VENV.parent.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers (and parallel sessions) wait for the one that builds instead of installing
    # into the same folder at once.
    with (VENV.parent / f"{VENV.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _build(python, marker)
    return python


def _build(python: Path, marker: Path) -> None:
    torch_version = version("torch").split("+")[0]
    subprocess.run([_uv(), "venv", "-q", "--allow-existing", "--python", sys.executable, str(VENV)], check=True)
    packages = [
        f"litdata=={UPSTREAM_VERSION}",
        f"torch=={torch_version}",
        "zstd",
        "zstandard",
        "cryptography",
        "pillow",
        "polars>1.0.0",  # upstream's ParquetLoader and index_parquet_dataset refuse to run without it
    ]
    subprocess.run([_uv(), "pip", "install", "-q", "--python", str(python), *packages, "pyarrow"], check=True)
    marker.touch()


def run_upstream(script: str, *args: str) -> Any:
    """Run ``script`` with upstream litdata; it must pickle its result to the path in ``sys.argv[1]``."""
    python = upstream_python()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.pkl"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env["LITDATA_CACHE_DIR"] = str(Path(tmp) / "cache")
        proc = subprocess.run(
            [str(python), "-c", script, str(out), *args], capture_output=True, text=True, env=env, cwd=tmp, check=False
        )
        if proc.returncode != 0:
            raise AssertionError(f"upstream litdata failed:\n{proc.stdout}\n{proc.stderr}")
        with open(out, "rb") as handle:
            return pickle.load(handle)
