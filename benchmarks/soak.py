"""The soak's long mode: soak rounds back to back for minutes or hours (issue 26).

Not a benchmark (nothing is timed against anything): each round is what ``tests/test_soak.py``
runs (``tests/support/soak.py`` says what it does and checks), bigger and slower, with keys that expire
every minute and a fresh fault schedule, bucket and cache; rounds repeat until ``--minutes`` have
passed. The first round with a problem stops the run, prints its problems and keeps its folder
(the ranks' events, stderr and state dicts); otherwise every folder is removed.

    uv run python -m benchmarks.soak --minutes 30
    uv run python -m benchmarks.soak --minutes 240 --samples 20000 --keys credential-process --stop-downloader

Each round prints one JSON line (its numbers); the last line says how many rounds passed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.support.servers import start_moto
from tests.support.soak import SoakConfig, run_soak

ROOT = Path(__file__).resolve().parents[1]


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="run rounds until this much time has passed")
    parser.add_argument("--samples", type=int, default=8192, help="samples in each round's dataset")
    parser.add_argument("--step", type=float, default=0.03, help="seconds of each rank's training step")
    parser.add_argument("--keys", default="imds", choices=("static", "imds", "credential-process"))
    parser.add_argument("--key-ttl", type=float, default=50.0, help="keys must be replaced after this many seconds")
    parser.add_argument("--key-grace", type=float, default=10.0, help="...and are refused this much later")
    parser.add_argument("--rank-variable", default="RANK", choices=("RANK", "GLOBAL_RANK"))
    parser.add_argument("--stop-downloader", action="store_true", help="SIGSTOP a downloader in epoch 1")
    parser.add_argument("--stop-seconds", type=float, default=90.0)
    parser.add_argument("--watchdog", type=float, default=60.0, help="the loader's watchdog limit (s)")
    parser.add_argument("--strict-leftovers", action="store_true", help="fail on known leftovers of killed ranks")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="for every rank")
    parser.add_argument("--keep", action="store_true", help="keep every round's folder")
    parser.add_argument("--folder", default=None, help="where rounds run (default: a temporary folder)")
    return parser.parse_args()


def _config(args: argparse.Namespace, seed: int) -> SoakConfig:
    per_epoch = args.samples // 4 * args.step / 4  # seconds an env rank's training steps take per epoch
    return SoakConfig(
        samples=args.samples,
        chunk_size=8,
        step_s=args.step,
        keys=args.keys,
        key_ttl_s=args.key_ttl,
        key_grace_s=args.key_grace,
        rank_variable=args.rank_variable,
        stop_downloader=args.stop_downloader,
        stop_s=args.stop_seconds,
        watchdog_s=args.watchdog,
        checkpoint_batch=max(2, args.samples // 64),
        cache_chunks=max(24, args.samples // 8 // 5),
        fault_gap=40,
        deadline_s=max(600.0, 6 * per_epoch + args.stop_seconds),
        seed=seed,
        extra_env=dict(item.split("=", 1) for item in args.env),
        allow_killed_leftovers=not args.strict_leftovers,
    )


def main() -> int:
    args = _arguments()
    base = Path(args.folder or tempfile.mkdtemp(prefix="litdata-soak-"))
    base.mkdir(parents=True, exist_ok=True)
    ends = time.monotonic() + args.minutes * 60
    passed = 0
    with start_moto() as server:
        seed = 0
        while seed == 0 or time.monotonic() < ends:  # at least one round
            folder = base / f"round-{seed:04d}"
            report = run_soak(_config(args, seed), server, folder)
            problems = report.problems()
            print(json.dumps({"round": seed, **report.summary()}, default=str), flush=True)
            if problems:
                print(f"round {seed} failed (its folder is kept: {folder}):", file=sys.stderr)
                print("\n".join(problems), file=sys.stderr)
                print(json.dumps({"rounds_passed": passed, "failed_round": seed}), flush=True)
                return 1
            passed += 1
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
            seed += 1
    print(json.dumps({"rounds_passed": passed, "minutes": args.minutes}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
