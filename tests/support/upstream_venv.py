"""A side virtual environment with the real upstream ``litdata==0.2.76``, for compatibility tests.

Built once with uv into ``.side-venvs/`` (ignored by git). torch is pinned to the version of this
environment so uv links it from its cache instead of downloading it again.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_VERSION = "0.2.76"
VENV = ROOT / ".side-venvs" / f"upstream-{UPSTREAM_VERSION}"
ZYGOTE = Path(__file__).resolve().with_name("upstream_zygote.py")


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


class _Zygote:
    """``tests/support/upstream_zygote.py`` running in the side venv: torch imported once, a fork per script."""

    def __init__(self, python: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(python), "-c", ZYGOTE.read_text(), "--"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=tempfile.gettempdir(),
            text=True,
        )

    def run(self, request: dict[str, Any]) -> int | None:
        """The script's exit code, or None if the server is gone (the caller then starts another)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        answer = self.proc.stdout.readline()
        return json.loads(answer)["code"] if answer else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def _stop_zygote() -> None:
    if _zygote is not None:
        _zygote.stop()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}


def _run_forked(python: Path, script: str, argv: list[str], env: dict[str, str], cwd: str) -> tuple[int, str, str]:
    global _zygote
    with tempfile.TemporaryDirectory(prefix="upstream-logs-") as logs:  # not in cwd: the script may list it
        request = {
            "script": script,
            "argv": argv,
            "env": env,
            "cwd": cwd,
            "stdout": str(Path(logs) / "stdout"),
            "stderr": str(Path(logs) / "stderr"),
        }
        with _zygote_lock:
            code = None
            for _ in range(2):  # a server that died (killed by a test's cleanup, say) is replaced once
                if _zygote is None or _zygote.proc.poll() is not None:
                    if _zygote is None:
                        atexit.register(_stop_zygote)
                    _zygote = _Zygote(python, {k: v for k, v in env.items() if k != "LITDATA_CACHE_DIR"})
                code = _zygote.run(request)
                if code is not None:
                    break
                _zygote.stop()
            if code is None:
                raise RuntimeError(
                    "the upstream zygote (tests/support/upstream_zygote.py) keeps dying; "
                    "LITDATA_TEST_UPSTREAM_FORK=0 runs without it"
                )
        stdout, stderr = (
            path.read_text(errors="replace") if path.exists() else ""
            for path in (Path(request["stdout"]), Path(request["stderr"]))
        )
    return code, stdout, stderr


def run_upstream(script: str, *args: str) -> Any:
    """Run ``script`` with upstream litdata; it must pickle its result to the path in ``sys.argv[1]``.

    The script runs as ``python -c script`` would, in a folder of its own with its own
    ``LITDATA_CACHE_DIR``; by default it is forked from a side-venv process that imported torch
    already (``tests/support/upstream_zygote.py``: 3 s less per call). ``LITDATA_TEST_UPSTREAM_FORK=0`` starts
    a fresh interpreter per call instead.
    """
    python = upstream_python()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.pkl"
        env = _clean_env()
        env["LITDATA_CACHE_DIR"] = str(Path(tmp) / "cache")
        if os.environ.get("LITDATA_TEST_UPSTREAM_FORK", "1") != "0":
            code, stdout, stderr = _run_forked(python, script, [str(out), *args], env, tmp)
        else:
            proc = subprocess.run(
                [str(python), "-c", script, str(out), *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp,
                check=False,
            )
            code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        if code != 0:
            raise AssertionError(f"upstream litdata failed:\n{stdout}\n{stderr}")
        with open(out, "rb") as handle:
            return pickle.load(handle)
