"""The benchmark upstream's docs cite, ``scripts/bench/bench_node_queue.py``, runs at that path (ours only
here: the ratios against upstream are for reading, never asserted)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.zygote import run_python

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("io_matrix", [False, True])
def test_bench_node_queue_runs_as_the_docs_cite_it(io_matrix: bool) -> None:
    command = [
        str(ROOT / "scripts" / "bench" / "bench_node_queue.py"),
        "--files",
        "12",
        "--workers",
        "2",
        "--libs",
        "ours",
    ]
    done = run_python(command + (["--io-matrix"] if io_matrix else []), env=dict(os.environ), cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "| ours |" in line]
    places = [("local", "local")] + (
        [("local", "remote"), ("remote", "local"), ("remote", "remote")] if io_matrix else []
    )
    assert [tuple(row.split("|")[1:3]) for row in rows] == [(f" {i} ", f" {o} ") for i, o in places], done.stdout
