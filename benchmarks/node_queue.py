"""optimize's shared queue against ordered slices, on skewed inputs, ours and upstream in the same run.

The benchmark upstream LitData's docs cite as ``scripts/bench/bench_node_queue.py`` (that path runs
this file)::

    uv run python scripts/bench/bench_node_queue.py --files 4000 --workers 8
    uv run python scripts/bench/bench_node_queue.py --files 200 --workers 4 --io-matrix

``--files`` files, the first ``--big-files`` of them (default: a quarter, at most 500) of 1 MiB and
the rest of 4 KiB, so ordered slices give the first worker nearly all the bytes. Each input is one
file: ``fn`` reads it, hashes it and returns its bytes. For each library (``--libs``) and each mode
(``keep_data_ordered=False``: the shared queue, upstream's default; ``True``: ordered slices), a
fresh process of that library's venv times ``optimize`` and the output is checked (every file one
sample). ``--io-matrix`` also runs remote inputs (``s3://`` URLs: a library that fetches inputs
naming objects hands ``fn`` the local copy, otherwise ``fn`` downloads them with boto3) and
remote outputs (``output_dir="s3://..."``) against a ``moto_server`` on 127.0.0.1, ours only:
upstream's obstore transfers refuse an http:// endpoint. Printed: seconds per run, then per library
ordered/shared and per mode ours/upstream, each ratio from the same round. Speed is never
asserted in tests; this is for reading, not CI.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIG = 2**20
SMALL = 4096
_client: Any = None  # a worker's boto3 client, made on its first remote input
# Upstream 0.2.76 fetches s3:// inputs and uploads outputs through an obstore S3Store built with its
# own fixed client options (no allow_http): with AWS_ALLOW_HTTP=true set, both still fail against
# the local http:// server.
_UPSTREAM_REMOTE = (
    "upstream 0.2.76 fetches inputs and uploads outputs through obstore with fixed client options that refuse "
    "the local server's http:// endpoint (BadScheme), so its runs with remote inputs or outputs are skipped"
)


def process(item: str) -> dict[str, Any]:
    """``fn``: one file's bytes (a local path or ``s3://bucket/key``), with their sha256."""
    global _client
    if item.startswith("s3://"):
        if _client is None:
            import boto3

            _client = boto3.client("s3", **json.loads(os.environ["BENCH_S3"]))
        bucket, key = item[len("s3://") :].split("/", 1)
        data = _client.get_object(Bucket=bucket, Key=key)["Body"].read()
    else:
        with open(item, "rb") as handle:
            data = handle.read()
    return {"name": os.path.basename(item), "sha256": hashlib.sha256(data).hexdigest(), "data": data}


def _child(spec: dict[str, Any]) -> None:
    """Run one ``optimize`` in this (the library's) interpreter and print its time and sample count."""
    from litdata import optimize

    options = spec["storage_options"]
    started = time.perf_counter()
    optimize(
        fn=process,
        inputs=spec["inputs"],
        output_dir=spec["output_dir"],
        num_workers=spec["workers"],
        chunk_bytes="64MB",
        keep_data_ordered=spec["ordered"],
        **({"storage_options": options} if options else {}),
    )
    seconds = time.perf_counter() - started
    print("NODEQUEUE " + json.dumps({"seconds": seconds}), flush=True)


def _python(lib: str, upstream: str | None) -> str:
    if lib == "ours":
        return sys.executable
    if upstream:
        return upstream
    from tests.support.upstream_venv import upstream_python

    return str(upstream_python())


def _samples(output_dir: str, s3: dict[str, str] | None) -> int:
    if output_dir.startswith("s3://"):
        import boto3

        bucket, key = output_dir[len("s3://") :].split("/", 1)
        body = boto3.client("s3", **(s3 or {})).get_object(Bucket=bucket, Key=f"{key}/index.json")["Body"].read()
        index = json.loads(body)
    else:
        index = json.loads((Path(output_dir) / "index.json").read_text())
    return sum(int(chunk["chunk_size"]) for chunk in index["chunks"])


def _run(python: str, lib: str, spec: dict[str, Any], s3: dict[str, str] | None, work: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    if s3:
        env["BENCH_S3"] = json.dumps(s3)
        env["AWS_ALLOW_HTTP"] = "true"  # upstream's obstore downloads refuse http:// endpoints otherwise
    with tempfile.TemporaryDirectory(prefix="node-queue-cache-", dir=work) as cache:
        env["LITDATA_CACHE_DIR"] = cache
        spec_file = Path(cache) / "spec.json"  # thousands of inputs: too long for one argument
        spec_file.write_text(json.dumps(spec))
        done = subprocess.run(
            [python, __file__, "--child", str(spec_file)],
            cwd=work, env=env, capture_output=True, text=True, timeout=3600, check=False,
        )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("NODEQUEUE ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{lib} {spec['output_dir']}: optimize failed\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    found = _samples(spec["output_dir"], s3)
    if found != len(spec["inputs"]):
        raise SystemExit(f"{lib} {spec['output_dir']}: {found} samples written, expected {len(spec['inputs'])}")
    return float(json.loads(lines[-1][len("NODEQUEUE ") :])["seconds"])


def _make_files(folder: Path, files: int, big: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        path = folder / f"{i:06d}.bin"
        path.write_bytes(os.urandom(BIG if i < big else SMALL))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description="optimize's shared queue against ordered slices, on skewed inputs")
    parser.add_argument("--files", type=int, default=200, help="input files (default 200)")
    parser.add_argument("--workers", type=int, default=4, help="optimize's num_workers (default 4)")
    parser.add_argument("--big-files", type=int, default=None, help="how many of the first files are 1 MiB")
    parser.add_argument("--io-matrix", action="store_true", help="also remote inputs and outputs (local S3 server)")
    parser.add_argument("--libs", default="ours,upstream", help="ours, upstream or both (default both)")
    parser.add_argument("--upstream-python", default=None, help="upstream's python (default: the side venv's)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(json.loads(Path(args.child).read_text()))
        return
    big = min(500, args.files // 4) if args.big_files is None else args.big_files
    libs = [lib.strip() for lib in args.libs.split(",") if lib.strip()]
    pythons = {lib: _python(lib, args.upstream_python) for lib in libs}
    with tempfile.TemporaryDirectory(prefix="node-queue-") as tmp:
        work = Path(tmp)
        paths = _make_files(work / "files", args.files, big)
        print(f"[node-queue] {args.files} files ({big} of 1 MiB, the rest 4 KiB), {args.workers} workers", flush=True)
        if args.io_matrix:
            from tests.support.servers import start_moto

            with start_moto() as server:
                client = server.client()
                client.create_bucket(Bucket="bench")
                for path in paths:
                    client.upload_file(str(path), "bench", f"files/{path.name}")
                s3 = {
                    "endpoint_url": server.endpoint,
                    "aws_access_key_id": server.access_key,
                    "aws_secret_access_key": server.secret_key,
                    "region_name": server.region,
                }
                remote = [f"s3://bench/files/{path.name}" for path in paths]
                matrix = {
                    (i, o): (remote if i == "remote" else [str(p) for p in paths], o)
                    for i in ("local", "remote")
                    for o in ("local", "remote")
                }
                _measure(args, pythons, matrix, work, s3, server.storage_options())
        else:
            _measure(args, pythons, {("local", "local"): ([str(p) for p in paths], "local")}, work, None, None)


def _measure(
    args: argparse.Namespace,
    pythons: dict[str, str],
    matrix: dict[tuple[str, str], tuple[list[str], str]],
    work: Path,
    s3: dict[str, str] | None,
    storage_options: dict[str, str] | None,
) -> None:
    modes = {"shared": False, "ordered": True}
    results: dict[tuple[Any, ...], list[float]] = {}
    run = 0
    for round_ in range(args.rounds):
        for (inputs_at, output_at), (inputs, output) in matrix.items():
            for mode, ordered in modes.items():
                for lib, python in pythons.items():
                    remote_out = output == "remote"
                    if lib == "upstream" and (remote_out or inputs_at == "remote"):
                        continue  # see _UPSTREAM_REMOTE
                    run += 1
                    spec = {
                        "inputs": inputs,
                        "output_dir": f"s3://bench/out-{run}" if remote_out else str(work / f"out-{run}"),
                        "workers": args.workers,
                        "ordered": ordered,
                        # remote inputs: both libraries download s3:// inputs themselves, with these options
                        "storage_options": storage_options if remote_out or inputs_at == "remote" else None,
                    }
                    seconds = _run(python, lib, spec, s3, work)
                    results.setdefault((inputs_at, output_at, mode, lib), []).append(seconds)
                    print(f"[node-queue] round {round_ + 1} in:{inputs_at} out:{output_at} {mode:7} {lib:8} "
                          f"{seconds:7.2f} s", flush=True)  # fmt: skip
    print("\n| input | output | lib | shared s | ordered s | ordered / shared |\n|---|---|---|---|---|---|")
    for inputs_at, output_at in matrix:
        for lib in pythons:
            shared = results.get((inputs_at, output_at, "shared", lib))
            ordered = results.get((inputs_at, output_at, "ordered", lib))
            if shared is None or ordered is None:
                print(f"| {inputs_at} | {output_at} | {lib} | n/a | n/a | n/a |")
                continue
            ratio = _median([o / s for o, s in zip(ordered, shared, strict=True)])
            print(f"| {inputs_at} | {output_at} | {lib} | {min(shared):.2f} | {min(ordered):.2f} | {ratio:.2f} |")
    if "ours" in pythons and "upstream" in pythons:
        print("\n| input | output | mode | ours / upstream (median of rounds) |\n|---|---|---|---|")
        for inputs_at, output_at in matrix:
            for mode in modes:
                ours = results.get((inputs_at, output_at, mode, "ours"), [])
                theirs = results.get((inputs_at, output_at, mode, "upstream"))
                if theirs is None:
                    print(f"| {inputs_at} | {output_at} | {mode} | n/a |")
                    continue
                ratio = _median([o / t for o, t in zip(ours, theirs, strict=True)])
                print(f"| {inputs_at} | {output_at} | {mode} | {ratio:.2f} |")
    if len(matrix) > 1 and "upstream" in pythons:
        print(f"\nn/a: {_UPSTREAM_REMOTE}")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


if __name__ == "__main__":
    main()
