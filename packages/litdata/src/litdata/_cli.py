"""The ``litdata`` command line (also ``python -m litdata``).

Each command group registers itself in :data:`COMMANDS` (a function that adds its sub-parser and
sets ``handler`` on the parsed namespace). Handlers return the process exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["COMMANDS", "build_parser", "main"]


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _cache_path(args: argparse.Namespace) -> int:
    from litdata_io import cache_path

    print(cache_path())
    return 0


def _cache_clear(args: argparse.Namespace) -> int:
    from litdata_io import cache_path, clear_cache

    try:
        result = clear_cache(args.path or cache_path())
    except ValueError as err:
        print(f"litdata cache clear: {err}", file=sys.stderr)
        return 2
    print(f"Removed {result.files} files ({_human(result.bytes)}) from {result.path}")
    if result.in_use:
        print(f"Kept {len(result.in_use)} in use by a running process:", file=sys.stderr)
        for path in result.in_use:
            print(f"  {path}", file=sys.stderr)
    return 0


def _add_cache(commands: Any) -> None:
    cache = commands.add_parser(
        "cache",
        help="the local chunk cache",
        description="Show or clear the local chunk cache (LITDATA_CACHE_DIR, default ~/.lightning/chunks).",
    )
    actions = cache.add_subparsers(dest="cache_command", metavar="{path,clear}")
    actions.required = True
    path = actions.add_parser("path", help="print the active cache directory")
    path.set_defaults(handler=_cache_path)
    clear = actions.add_parser(
        "clear",
        help="delete cached chunks",
        description="Delete cached chunks. Chunks a running process is reading are kept and listed.",
    )
    clear.add_argument("--path", help="clear this folder instead of the active cache directory")
    clear.set_defaults(handler=_cache_clear)


def _quickstart(args: argparse.Namespace) -> int:
    from litdata._quickstart import run  # numpy, litdata_prep: only when the command runs

    return run(args)


def _add_quickstart(commands: Any) -> None:
    quickstart = commands.add_parser(
        "quickstart",
        help="optimize, stream, stop and resume a small synthetic dataset on local disk",
        description="Make a small synthetic image dataset, optimize it, stream it with two loader workers, "
        "stop halfway, resume from the state dict and check nothing was repeated or lost.",
    )
    quickstart.add_argument("--samples", type=int, default=512, help="how many samples to make (default 512)")
    quickstart.add_argument("--workers", type=int, default=2, help="optimize and loader workers (default 2)")
    quickstart.add_argument("--batch-size", type=int, default=16, help="loader batch size (default 16)")
    quickstart.add_argument("--output", help="keep the dataset in this folder (default: a temporary folder)")
    quickstart.set_defaults(handler=_quickstart)


#: Functions that add one command group to the top-level sub-parsers.
COMMANDS: list[Callable[[Any], None]] = [_add_cache, _add_quickstart]


def build_parser() -> argparse.ArgumentParser:
    """The ``litdata`` argument parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="litdata",
        description="LitData: take training data from where it lives into PyTorch, fast and resumably.",
    )
    from litdata import __version__

    parser.add_argument("--version", action="version", version=f"litdata {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command")
    for register in COMMANDS:
        register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    return handler(args)
