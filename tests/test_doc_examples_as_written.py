"""Upstream's documentation examples run as a user runs them: the example's text as a script.

Each example is the docs' code unchanged but for an ``if __name__ == "__main__":`` guard (where the
docs have none and the example starts workers) and, for examples that need a bucket, the local
test server's URL and options. Every script runs in a fresh interpreter in an empty folder and
must exit with code 0 (the examples' own ``assert`` lines included).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_REPO = Path(__file__).resolve().parent.parent


def run_example(code: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 180.0) -> str:
    """Run ``code`` as ``example.py`` in ``cwd`` with this interpreter; its stdout, or fail with its output."""
    script = cwd / "example.py"
    script.write_text(textwrap.dedent(code))
    environ = {**os.environ, "PYTHONPATH": str(_REPO), **(env or {})}
    proc = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"rc {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    return proc.stdout


def test_append_keeps_input_order(tmp_path: Path) -> None:
    """docs line 1001: optimize, append, and the example's own assert on input order (default workers)."""
    run_example(
        """
        from litdata import optimize, StreamingDataset

        def compress(index):
            return index, index**2

        if __name__ == "__main__":
            # Add some data
            optimize(
                fn=compress,
                inputs=list(range(100)),
                output_dir="./my_optimized_dataset",
                chunk_bytes="64MB",
            )

            # Later on, you add more data
            optimize(
                fn=compress,
                inputs=list(range(100, 200)),
                output_dir="./my_optimized_dataset",
                chunk_bytes="64MB",
                mode="append",
            )

            ds = StreamingDataset("./my_optimized_dataset")
            assert len(ds) == 200
            assert ds[:] == [(i, i**2) for i in range(200)]
        """,
        tmp_path,
    )
