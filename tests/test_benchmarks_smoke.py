"""Keeps the benchmark harness from rotting: OUR side of ``--quick`` for a few cheap workloads.

No side venvs and no assertion about speed (speed is never asserted in tests); the cloud-shaped
rows start the S3 server and the loopback proxy in front of it. The four slow tests check their
rows of ONE ``--quick`` run of all of them (the ``quick`` fixture): the harness, its generated
inputs (the JPEG files both the image rows and the bytes rows read) and the datasets the rows share
are made once, not once per test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _quick_ours(tmp_path: Path, only: str) -> tuple[list[dict[str, Any]], str]:
    """Run ``--quick --libs ours --only <only>``; return its run records and its report."""
    report = tmp_path / "report.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--quick",
            "--libs",
            "ours",
            "--only",
            only,
            "--out",
            str(tmp_path / "out"),
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (results,) = (tmp_path / "out" / "quick").glob("results-*.jsonl")
    runs = [json.loads(line) for line in results.read_text().splitlines()]
    return [run for run in runs if run["row"] != "meta"], report.read_text()


# The rows the slow tests check (names, or a prefix: "scale"), each test its own group.
LOCAL_ROWS = ("stream-local-w0", "stream-local-cold-w2", "random-access")
CLOUD_ROWS = ("stream-s3-latency-w0", "stream-s3-capped-w2")
SCALE_ROWS = ("scale",)
BYTES_ROWS = ("optimize-bytes",)
BYTES_ROW_NAMES = ["optimize-bytes", "optimize-bytes-nopyc", "optimize-bytes-notorch"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str]:
    """One ``--quick --libs ours`` run of every row the slow tests check: its run records and its report."""
    only = ",".join(LOCAL_ROWS + CLOUD_ROWS + SCALE_ROWS + BYTES_ROWS)
    runs, text = _quick_ours(tmp_path_factory.mktemp("quick"), only)
    # --only chose exactly these rows, each run once
    expected = [*LOCAL_ROWS, *CLOUD_ROWS, "scale-small-chunks", *BYTES_ROW_NAMES]
    assert sorted(r["row"] for r in runs) == sorted(expected), runs
    return runs, text


def _rows(quick: tuple[list[dict[str, Any]], str], only: tuple[str, ...]) -> list[dict[str, Any]]:
    """The run records of the rows ``only`` names (as ``--only`` reads it: names or prefixes)."""
    return [run for run in quick[0] if run["row"].startswith(only)]


@pytest.mark.slow
def test_quick_suite_runs_our_side(quick: tuple[list[dict[str, Any]], str]) -> None:
    runs, text = _rows(quick, LOCAL_ROWS), quick[1]
    assert sorted((r["row"], r["lib"]) for r in runs) == [
        ("random-access", "ours"),
        ("stream-local-cold-w2", "ours"),
        ("stream-local-w0", "ours"),
    ]
    for run in runs:
        assert run["ok"], run
        assert run["items"] > 0 and run["elapsed_s"] > 0 and run["rss_peak_mb"] > 0
    assert next(r for r in runs if r["row"] == "stream-local-w0")["complete"] is True
    assert next(r for r in runs if r["row"] == "stream-local-cold-w2")["complete"] is True

    assert text.startswith("# Benchmarks\n") and "## Run it again" in text  # the whole page, from the template
    assert "## Reading from the local disk" in text
    assert "| stream-local-w0 | samples/s | 1 | **" in text
    assert "| random-access | samples/s | 1 | **" in text
    assert "| stream-local-cold-w2 | samples/s | 1 | **" in text


@pytest.mark.slow
def test_quick_cloud_rows_run_our_side(quick: tuple[list[dict[str, Any]], str]) -> None:
    """Issue 16's rows: JPEGs decoded in a transform, and a capped cache over many small chunks,
    both through the latency-and-bandwidth proxy in front of the S3 server."""
    sys.path.insert(0, str(ROOT))
    from benchmarks._config import QUICK

    runs, text = _rows(quick, CLOUD_ROWS), quick[1]
    assert sorted(r["row"] for r in runs) == ["stream-s3-capped-w2", "stream-s3-latency-w0"]
    for run in runs:
        assert run["ok"], run
        assert run["complete"] is True  # every sample (or label) once per epoch
        assert run["cache_peak_bytes"] > 0 and run["cpu_s"] > 0
    capped = next(r for r in runs if r["row"] == "stream-s3-capped-w2")
    assert capped["items"] == 2 * QUICK.small_records  # two epochs of the small dataset
    assert "| stream-s3-capped-w2 | samples/s | 1 | **" in text


def test_the_spread_goal_is_judged_against_the_machines_own_noise() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks._config import ROWS
    from benchmarks._report import Limits, _targets, summarize

    row = next(r for r in ROWS if r.spread is not None)

    def verdict(ours: list[float], noise: list[float]) -> str:
        records = [{"row": row.name, "lib": "ours", "ok": True, "items": 100, "elapsed_s": e} for e in ours]
        records += [{"row": row.name, "lib": "upstream", "ok": True, "items": 100, "elapsed_s": 10.0}] * 3
        lines = _targets([row], summarize(records), ["ours", "upstream"], Limits(noise={row.name: noise}))
        (line,) = [line for line in lines if line.startswith(f"| {row.name} |")]
        return line.split(" | ")[3]

    steady, noisy = [0.20, 0.21, 0.22], [0.20, 0.26, 0.30]  # spreads +-5% and +-19%
    assert verdict(steady, steady) == "yes"
    assert verdict(noisy, steady) == "no"
    assert verdict(noisy, noisy).startswith("no: +-15% is below this machine's own noise")
    assert verdict([6.0, 6.0, 6.0], steady) == "no"  # steady but only 1.67x upstream (the goal: 2x)


def test_the_suite_keeps_the_optimize_by_phase_section_it_does_not_write(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks._report import PHASES, write_report, write_section

    page, template = tmp_path / "benchmarks.md", "# B\n\n{results}\n\n## Phases\n\n{optimize_phases}\n"
    write_report(page, "suite one", template)
    assert "Not measured yet" in page.read_text()
    write_section(page, PHASES, "| bytes | 1x | 1.40x |")
    write_report(page, "suite two", template)
    text = page.read_text()
    assert "suite two" in text and "| bytes | 1x | 1.40x |" in text and "Not measured yet" not in text
    with pytest.raises(SystemExit, match="no section"):
        write_section(tmp_path / "other.md", PHASES, "x")


@pytest.mark.slow
def test_quick_scale_row_runs_our_side(quick: tuple[list[dict[str, Any]], str]) -> None:
    """Issue 29's row: open time and CPU per chunk of an epoch over datasets of tiny chunks, at two sizes."""
    sys.path.insert(0, str(ROOT))
    from benchmarks._config import QUICK

    runs, text = _rows(quick, SCALE_ROWS), quick[1]
    assert [r["row"] for r in runs] == ["scale-small-chunks"]
    (run,) = runs
    assert run["ok"], run
    sizes = [str(n) for n in QUICK.scale_chunks]
    assert sorted(run["us_per_chunk"]) == sorted(sizes) and all(run["us_per_chunk"][n] > 0 for n in sizes)
    assert all(run["open_s"][n] > 0 for n in sizes) and run["items"] == sum(QUICK.scale_chunks)
    assert "### Scale: many small chunks" in text
    assert f"| epoch CPU us per chunk (w0) | {QUICK.scale_chunks[1]:,} |" in text


@pytest.mark.slow
def test_quick_bytes_rows_run_our_side(quick: tuple[list[dict[str, Any]], str]) -> None:
    """Issue 32's rows: the JPEG files' bytes + a label, in a script that imports torch first (issue 46), and ours
    again with no compiled bytecode and without torch."""
    sys.path.insert(0, str(ROOT))
    from benchmarks._config import QUICK

    runs, text = _rows(quick, BYTES_ROWS), quick[1]
    assert sorted(r["row"] for r in runs) == BYTES_ROW_NAMES
    for run in runs:
        assert run["ok"], run
        assert run["items"] == QUICK.images and run["elapsed_s"] > 0
        assert run["torch_first"] == (not run["row"].endswith("-notorch")), run
    for name in BYTES_ROW_NAMES:
        assert f"| {name} | samples/s | 1 | **" in text
