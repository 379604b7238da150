"""What verifying chunk checksums costs the stream-s3-cold rows: ours, this checkout only.

Not a row of the suite: when upstream is benchmarked, the suite streams datasets written by
upstream's ``optimize``, which records no checksums, so its stream-s3-cold rows verify nothing.
This runs those rows exactly as the suite does (the same runner and parameters, a fresh process
and a fresh cache for every run, the suite's code warming between runs) over workload 1's dataset
written by ours, uploaded twice to the S3 server: once with its index as written (every chunk is
hashed as it downloads, and checked before anything reads it) and once with the checksum fields
removed from the index (nothing to check: the code path of a dataset without checksums). Each
round streams both, in alternating order; the report is each row's median rate of both and the
median and range of the rounds' own ratios checked/unchecked, in wall time and in CPU.

    uv run python -m benchmarks.checksum_cost --rounds 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks._config import FULL, QUICK, ROWS
from benchmarks._exec import run_once
from benchmarks._inputs import ensure_inputs, warm_code
from benchmarks.run import BUCKET, OUT, Context, code_roots, params_for, prepare_datasets, start_s3

ROOT = Path(__file__).resolve().parents[1]

UNCHECKED = "records-unchecked"


def _upload_unchecked(ctx: Context, folder: Path) -> None:
    """The dataset again under ``UNCHECKED``, its index without the checksum fields."""
    client = ctx.server.client()
    index = json.loads((folder / "index.json").read_text())
    for chunk in index["chunks"]:
        chunk.pop("checksum", None)
        chunk.pop("plain_checksum", None)
    client.put_object(Bucket=BUCKET, Key=f"{UNCHECKED}/index.json", Body=json.dumps(index).encode())
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name not in ("index.json", ".bench-ready"):
            client.upload_file(str(path), BUCKET, f"{UNCHECKED}/{path.name}")


def _hash_all(folder: Path) -> float:
    from litdata_format import checksum_file

    started = time.perf_counter()
    for path in folder.glob("chunk-*"):
        checksum_file(path)
    return time.perf_counter() - started


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="the suite's --quick sizes (a smoke test)")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    out = OUT / ("quick" if args.quick else "full")
    rows = [row for row in ROWS if row.name.startswith("stream-s3-cold")]
    ctx = Context(sizes=sizes, out=out, inputs=ensure_inputs(out, sizes), libs=["ours"])
    prepare_datasets(ctx, rows, limits_wanted=False)
    folder = ctx.datasets["records-litdata"]
    chunks = json.loads((folder / "index.json").read_text())["chunks"]
    if not all("checksum" in chunk for chunk in chunks):
        raise SystemExit(f"{folder}/index.json records no checksums: remove the folder and run again")
    code = code_roots(ctx.libs)
    with ExitStack() as stack:
        start_s3(ctx, stack, cloud=False)
        _upload_unchecked(ctx, folder)
        for row in rows:
            runs: dict[str, list[dict[str, Any]]] = {"checked": [], "unchecked": []}
            for round_ in range(args.rounds):
                order = ["checked", "unchecked"] if round_ % 2 == 0 else ["unchecked", "checked"]
                for kind in order:
                    warm_code(code)
                    work = ctx.work_dir(f"{row.name}-{kind}")
                    params = params_for(row, "ours", ctx, work)
                    if kind == "unchecked":
                        url = f"s3://{BUCKET}/{UNCHECKED}"
                        params["input"] = url
                        params["s3"] = {**params["s3"], "url": url}
                    log = out / "logs" / f"checksum-{row.name}-{kind}-r{round_}.log"
                    result = run_once("ours", row.kind, params, work=work, timeout=sizes.timeout, log=log)
                    if not result.get("ok") or not result.get("complete"):
                        raise SystemExit(f"{row.name} {kind} round {round_}: {result}; see {log}")
                    runs[kind].append(result)
            rate = {k: [r["items"] / r["elapsed_s"] for r in v] for k, v in runs.items()}
            cpu = {k: [r["cpu_s"] for r in v] for k, v in runs.items()}
            ratios = [c / u for c, u in zip(rate["checked"], rate["unchecked"], strict=True)]
            cpu_ratios = [c / u for c, u in zip(cpu["checked"], cpu["unchecked"], strict=True)]
            print(
                f"{row.name}: checked {statistics.median(rate['checked']):,.0f} samples/s, unchecked "
                f"{statistics.median(rate['unchecked']):,.0f}; per-round checked/unchecked {_spread(ratios)}, "
                f"CPU {_spread(cpu_ratios)}, {args.rounds} rounds",
                flush=True,
            )
    # The added work itself: hashing every chunk once, against the time an unchecked run takes.
    hashing = min(_hash_all(folder) for _ in range(5))
    print(f"hashing all {len(chunks)} chunks once: {hashing * 1000:.1f} ms on one core")


if __name__ == "__main__":
    main()
