"""Run the 4-process full-disk case (tests/scripts/full_disk_ranks.py) many times; not part of the suite.

    uv run python -m tests.scripts.full_disk_repeat --runs 20 --hold 5
    uv run python -m tests.scripts.full_disk_repeat --runs 20 --hold -1   # the other file stays

Each run mounts a fresh 1 MiB tmpfs (tests/support/small_disk.py), two ranks of two workers read a 4 MB
dataset into one cache on it, and another file takes the disk's last bytes. A run passes when the
ranks deliver every sample once between them, with no error and no staging folder left.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from litdata_prep import optimize
from tests.support.small_disk import on_a_small_disk

JOB = Path(__file__).with_name("full_disk_ranks.py")
SAMPLES = 200


def _blob(i: int) -> dict[str, object]:
    return {"i": i, "data": os.urandom(20_000)}


def write_dataset(output: Path) -> str:
    """A 4 MB dataset of 50 chunks of ~80 KB at ``output``; its URL."""
    optimize(_blob, list(range(SAMPLES)), str(output), chunk_bytes="100KB", num_workers=1, start_method="fork",
             verbose=False)  # fmt: skip
    return f"local:{output}"


def run_once(tmp_path: Path, url: str, hold: float) -> dict[str, Any]:
    """One run; its result with ``"passed"`` and ``"why"`` added."""
    result = on_a_small_disk(tmp_path, JOB.read_text(), url, str(hold))
    seen = sorted(i for rank in result["ranks"] for i in rank["seen"])
    errors = [rank["error"] for rank in result["ranks"] if rank["error"]]
    why = errors[0][-300:] if errors else "staging left" if result["partial"] else ""
    why = why or ("" if seen == list(range(SAMPLES)) else f"{len(seen)} samples of {SAMPLES}")
    return {**result, "passed": not why, "why": why}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds the other file stays (-1: for good)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="litdata-full-disk-"))
    try:
        url = write_dataset(base / "data")
        passed = 0
        for run in range(args.runs):
            started = time.monotonic()
            result = run_once(base, url, args.hold)
            passed += result["passed"]
            print(f"run {run + 1}: {'pass' if result['passed'] else 'FAIL'} in {time.monotonic() - started:.0f} s, "
                  f"the other file took {result['taken']} bytes {result['why']}", flush=True)  # fmt: skip
        print(f"{passed} of {args.runs} runs passed (hold {args.hold:g} s)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
