"""Sum a ``LITDATA_TEST_CPU_LOG`` file (tests/conftest.py) per test file, most CPU first.

Usage: ``LITDATA_TEST_CPU_LOG=/tmp/cpu.log uv run pytest``, then
``uv run python tests/scripts/cpu_report.py /tmp/cpu.log [--top 30]``.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path


def per_file(log: Path) -> dict[str, tuple[float, float, int]]:
    """File -> (user s, system s, tests) summed over the log's lines."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for line in log.read_text().splitlines():
        user, system, nodeid = line.split(" ", 2)
        entry = totals[nodeid.split("::", 1)[0]]
        entry[0] += float(user)
        entry[1] += float(system)
        entry[2] += 1
    return {name: (u, s, int(n)) for name, (u, s, n) in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU-seconds of the suite per test file.")
    parser.add_argument("log", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    totals = per_file(args.log)
    rows = sorted(totals.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    user, system = sum(v[0] for v in totals.values()), sum(v[1] for v in totals.values())
    print(f"{sum(v[2] for v in totals.values())} tests: {user:.0f} user + {system:.0f} system CPU-s")
    print(f"{'CPU-s':>7} {'user':>7} {'system':>7} {'tests':>5}  file")
    for name, (u, s, n) in rows[: args.top]:
        print(f"{u + s:7.1f} {u:7.1f} {s:7.1f} {n:5d}  {name}")


if __name__ == "__main__":
    main()
