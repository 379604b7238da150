"""``litracer LOG [-o OUT.json.gz]``: convert a litdata tracer log into a Chrome/Perfetto trace."""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from litracer._convert import convert_file, write_trace
from litracer._version import __version__

__all__ = ["main"]

_REQUIRED = ("name", "ph", "ts", "pid", "tid")


def _default_output(log: Path) -> Path:
    # gzip by default, as upstream's litracer: Perfetto and chrome://tracing open .json.gz as they are.
    return log.with_name(log.stem + ".json.gz") if log.suffix else log.with_name(log.name + ".json.gz")


def _validate(out: Path) -> list[str]:
    """Problems found when reading the written trace back as Chrome JSON; empty when it is sound."""
    raw = out.read_bytes()
    if out.suffix == ".gz":
        raw = gzip.decompress(raw)
    events = json.loads(raw)["traceEvents"]
    problems: list[str] = []
    for i, event in enumerate(events):
        missing = [k for k in _REQUIRED if k not in event]
        if missing:
            problems.append(f"event {i} ({event.get('name')!r}) lacks {', '.join(missing)}")
        elif event["ph"] == "X" and not (isinstance(event.get("dur"), (int, float)) and event["dur"] >= 0):
            problems.append(f"event {i} ({event['name']!r}) is complete but has no duration")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Args:
        argv: the arguments after the program name; None reads ``sys.argv``.
    """
    parser = argparse.ArgumentParser(
        prog="litracer",
        description="Convert a litdata tracer log (enable_tracer) into Chrome/Perfetto JSON. "
        "Open the result at https://ui.perfetto.dev or chrome://tracing.",
    )
    parser.add_argument("log", type=Path, help="the log written by enable_tracer (e.g. litdata_debug.log)")
    parser.add_argument(
        "-o",
        "--output",
        help="output file (default: LOG with a .json.gz suffix, gzip Chrome JSON); a .json name is "
        "uncompressed; '-' is stdout",
    )
    parser.add_argument("--cat", help="keep only these comma-separated categories, e.g. download,read,delete")
    parser.add_argument("--no-complete", action="store_true", help="keep B/E pairs instead of complete (X) events")
    parser.add_argument("--quiet", action="store_true", help="print only the one-line summary")
    parser.add_argument("--validate", action="store_true", help="read the output back and check every event")
    parser.add_argument("--version", action="version", version=f"litracer {__version__}")
    args = parser.parse_args(argv)

    if not args.log.is_file():
        print(f"litracer: {args.log}: no such file", file=sys.stderr)
        return 2
    categories = [c for c in args.cat.split(",") if c.strip()] if args.cat else None
    conv = convert_file(args.log, complete=not args.no_complete, categories=categories)
    out = args.output or str(_default_output(args.log))
    write_trace(conv.trace, out)

    if conv.skipped and not args.quiet:
        print(
            f"litracer: warning: skipped {conv.skipped} line(s) that are not whole events "
            f"(first: line {conv.first_skipped})",
            file=sys.stderr,
        )
    target = "stdout" if out == "-" else out
    print(f"litracer: {conv.summary()} -> {target}", file=sys.stderr)
    if args.validate and out != "-":
        problems = _validate(Path(out))
        for problem in problems[:20]:
            print(f"litracer: invalid: {problem}", file=sys.stderr)
        if problems:
            return 1
    return 0
