"""Profile OUR side of one benchmark workload with py-spy (workers included) and print the hot spots.

Usage (from the repository root, after the suite generated its inputs once)::

    uv run python -m benchmarks.profile_ours optimize-records
    uv run python -m benchmarks.profile_ours stream-local-w2 --top 30 --rate 250

py-spy comes from ``py-spy`` on PATH or else ``uvx --from py-spy py-spy``. The workload runs exactly
as in the suite (same runner, same parameters, full sizes unless ``--quick``) under
``py-spy record --subprocesses``; the raw stacks are saved next to the suite's outputs and summed:
self time per source line (where the CPU is), and inclusive time per function.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from benchmarks._config import FULL, QUICK, ROWS
from benchmarks._exec import RUNNERS, _env
from benchmarks._inputs import ensure_inputs
from benchmarks.run import OUT, Context, params_for, prepare_datasets, start_s3

ROOT = Path(__file__).resolve().parents[1]

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _py_spy() -> list[str]:
    found = shutil.which("py-spy")
    if found:
        return [found]
    uvx = shutil.which("uvx")
    if uvx:
        return [uvx, "--from", "py-spy", "py-spy"]
    raise SystemExit("py-spy is needed: uv tool install py-spy (or pip install py-spy)")


def _short(path: str) -> str:
    for marker in ("/site-packages/", "/work/main/", str(ROOT) + "/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def summarize(raw: Path, top: int) -> str:
    """Self samples per line and inclusive samples per function, from py-spy's raw (collapsed) output."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        seen: set[str] = set()
        for i, frame in enumerate(frames):
            match = _FRAME.match(frame)
            if match is None:
                continue  # a process or thread root
            where = _short(match["file"])
            function = f"{match['func']} ({where})"
            if function not in seen:
                seen.add(function)
                inclusive[function] += count
            if i == len(frames) - 1:
                own[f"{match['func']} ({where}:{match['line'] or '?'})"] += count
    lines = [f"{total} samples (on-CPU, all processes)", "", "self (the line the CPU was on):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines += ["", "inclusive (function anywhere on the stack):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("row", choices=[row.name for row in ROWS])
    parser.add_argument("--quick", action="store_true", help="the --quick sizes")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    args = parser.parse_args(argv)

    row = next(r for r in ROWS if r.name == args.row)
    sizes = QUICK if args.quick else FULL
    out = OUT / ("quick" if args.quick else "full")
    libs = ["ours", "upstream"] if (out / "data").glob("*-by-upstream") else ["ours"]
    ctx = Context(sizes=sizes, out=out, inputs=ensure_inputs(out, sizes), libs=libs)
    prepare_datasets(ctx, [row], limits_wanted=False)
    work = out / "profile" / row.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    raw = out / "profile" / f"{row.name}.pyspy.txt"
    with ExitStack() as stack:
        if row.s3:
            start_s3(ctx, stack, cloud=row.cloud)
        params = params_for(row, "ours", ctx, work / "run")
        command = [
            *_py_spy(),
            "record",
            "--subprocesses",
            "--format",
            "raw",
            "--rate",
            str(args.rate),
            "-o",
            str(raw),
            "--",
            sys.executable,
            str(RUNNERS["ours"]),
            "ours",
            row.kind,
            json.dumps(params),
        ]
        proc = subprocess.run(command, cwd=work, env=_env(work), capture_output=True, text=True, check=False)
    result = [line for line in proc.stdout.splitlines() if line.startswith("BENCH_RESULT ")]
    print(result[-1] if result else proc.stdout[-2000:] + proc.stderr[-2000:])
    print(f"raw stacks: {raw}\n")
    print(summarize(raw, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
