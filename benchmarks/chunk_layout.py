"""optimize's chunk layout, ours vs upstream LitData 0.2.76 in the same run: chunk counts and token blocks.

Not a suite row: for each case, a fresh process of each library's venv runs the same ``optimize``
call and the script prints how many chunks each wrote (upstream twice: its default shared queue
and ``keep_data_ordered=True``), whether ours is within one partial chunk per worker of upstream's
(``ours <= upstream + workers``), whether two runs of ours wrote the same layout (file names, sizes,
sample counts), and for the token case how many blocks ``TokensLoader(block_size=2049)`` reads
against ``total_tokens // 2049``::

    uv run python -m benchmarks.chunk_layout
    uv run python -m benchmarks.chunk_layout --cases records --workers 2,4
    git archive REV packages | tar -x -C /tmp/rev && uv run python -m benchmarks.chunk_layout --ours-src /tmp/rev

Cases (issue 52): ``records``, 100,000 small ``(i, i**2)`` samples at ``chunk_bytes="64MB"``;
``images``, the docs' merge example (250 random 32x32 JPEGs, ``num_workers=4``, 64 MB chunks);
``tokens``, 300 int32 token arrays of 1-999 tokens, ``TokensLoader`` with ``chunk_size=8 * 2049``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

BLOCK = 2049
TOKEN_INPUTS = 300


def record(i: int) -> tuple[int, int]:
    return i, i**2


def random_image(index: int) -> dict[str, Any]:
    """The docs' ``random_images`` (a fixed seed per input, so every library writes the same bytes)."""
    import litdata as ld

    array = np.random.default_rng(index).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    return {"index": index, "image": ld.Image(array=array, quality=95, format="jpeg"), "class": index % 10}


def token_length(i: int) -> int:
    return 1 + (i * 7919) % 999


def tokens(i: int) -> np.ndarray:
    return np.full(token_length(i), i, dtype=np.int32)


CASES: dict[str, dict[str, Any]] = {
    "records": {"fn": "record", "inputs": 100_000, "options": {"chunk_bytes": "64MB"}, "workers": [2, 4]},
    "images": {"fn": "random_image", "inputs": 250, "options": {"chunk_bytes": "64MB"}, "workers": [4]},
    "tokens": {"fn": "tokens", "inputs": TOKEN_INPUTS, "options": {"chunk_size": 8 * BLOCK}, "workers": [1, 2, 4]},
}


def _child(spec: dict[str, Any]) -> None:
    """One ``optimize`` in this (the library's) interpreter; print the index's chunks (and token blocks)."""
    from litdata import StreamingDataset, optimize
    from litdata.streaming.item_loader import TokensLoader

    case = CASES[spec["case"]]
    options = dict(case["options"])
    if spec["case"] == "tokens":
        options["item_loader"] = TokensLoader()
    if spec["ordered"]:
        options["keep_data_ordered"] = True
    optimize(
        fn=globals()[case["fn"]],
        inputs=list(range(case["inputs"])),
        output_dir=spec["output_dir"],
        num_workers=spec["workers"],
        start_method="fork",  # the layout does not depend on it; the run does not pay a spawn per worker
        **options,
    )
    index = json.loads((Path(spec["output_dir"]) / "index.json").read_text())
    out = Path(spec["output_dir"])
    layout = [(c["filename"], (out / c["filename"]).stat().st_size, c["chunk_size"]) for c in index["chunks"]]
    blocks = None
    if spec["case"] == "tokens":
        blocks = len(StreamingDataset(spec["output_dir"], item_loader=TokensLoader(block_size=BLOCK)))
    print("LAYOUT " + json.dumps({"layout": layout, "blocks": blocks}), flush=True)


def _python(lib: str) -> str:
    if lib == "ours":
        return sys.executable
    from tests.support.upstream_venv import upstream_python

    return str(upstream_python())


def _run(python: str, spec: dict[str, Any], work: Path, src: str | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    if src:  # an exported older checkout's packages in front of this one's
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in sorted(Path(src).glob("packages/*/src")))
    with tempfile.TemporaryDirectory(prefix="chunk-layout-", dir=work) as tmp:
        env["LITDATA_CACHE_DIR"] = str(Path(tmp) / "cache")
        spec = {**spec, "output_dir": str(Path(tmp) / "out")}
        done = subprocess.run(
            [python, __file__, "--child", json.dumps(spec)],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("LAYOUT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{python} {spec}: optimize failed\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len("LAYOUT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description="optimize's chunk counts and token blocks, ours vs upstream 0.2.76")
    parser.add_argument("--cases", default=",".join(CASES), help=f"some of {','.join(CASES)} (default all)")
    parser.add_argument("--workers", default=None, help="worker counts (default: each case's own)")
    parser.add_argument("--ours-src", default=None, help="run ours from this exported checkout (git archive)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(json.loads(args.child))
        return
    ours, upstream = _python("ours"), _python("upstream")
    total_tokens = sum(token_length(i) for i in range(TOKEN_INPUTS))
    print("| case | workers | ours chunks | upstream chunks (default / ordered) | ours <= upstream + workers "
          "| ours: same layout twice | blocks ours / upstream (default / ordered) / total // 2049 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="chunk-layout-") as tmp:
        for name in args.cases.split(","):
            workers = [int(w) for w in args.workers.split(",")] if args.workers else CASES[name]["workers"]
            for w in workers:
                spec = {"case": name, "workers": w, "ordered": False}
                first, second = (_run(ours, spec, Path(tmp), args.ours_src) for _ in range(2))
                up = _run(upstream, spec, Path(tmp))
                up_ordered = _run(upstream, {**spec, "ordered": True}, Path(tmp))
                n, n_up = len(first["layout"]), len(up["layout"])
                blocks = (
                    ""
                    if first["blocks"] is None
                    else f"{first['blocks']} / {up['blocks']} / {up_ordered['blocks']} / {total_tokens // BLOCK}"
                )
                print(
                    f"| {name} | {w} | {n} | {n_up} / {len(up_ordered['layout'])} | {'yes' if n <= n_up + w else 'NO'} "
                    f"| {'yes' if first['layout'] == second['layout'] else 'NO'} | {blocks} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
