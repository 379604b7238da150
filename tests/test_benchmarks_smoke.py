"""Keeps the benchmark harness from rotting: OUR side of ``--quick`` for two cheap workloads.

No side venvs, no S3 server, and no assertion about speed (speed is never asserted in tests).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_suite_runs_our_side(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--libs",
            "ours",
            "--only",
            "stream-local-w0,random-access",
            "--out",
            str(tmp_path / "out"),
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    (results,) = (tmp_path / "out" / "quick").glob("results-*.jsonl")
    runs = [json.loads(line) for line in results.read_text().splitlines()]
    runs = [run for run in runs if run["row"] != "meta"]
    assert sorted((r["row"], r["lib"]) for r in runs) == [("random-access", "ours"), ("stream-local-w0", "ours")]
    for run in runs:
        assert run["ok"], run
        assert run["items"] > 0 and run["elapsed_s"] > 0 and run["rss_peak_mb"] > 0
    assert next(r for r in runs if r["row"] == "stream-local-w0")["complete"] is True

    text = report.read_text()
    assert "<!-- results:begin" in text and "<!-- results:end -->" in text
    assert "| stream-local-w0 | samples/s | 1 | **" in text
    assert "| random-access | samples/s | 1 | **" in text
