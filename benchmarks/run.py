"""The benchmark suite: ours vs upstream LitData 0.2.76 vs MosaicML Streaming 0.13.0, side by side.

Usage (from the repository root)::

    uv run python -m benchmarks.run                 # the full suite, 3 rounds, writes docs/benchmarks.md
    uv run python -m benchmarks.run --quick         # tiny sizes, 1 round: a smoke test (< 2 minutes)
    uv run python -m benchmarks.run --only stream-local,random-access --rounds 5
    uv run python -m benchmarks.run --libs ours --quick --only stream-local-w0   # no side venvs needed

Every run is a separate process (``benchmarks/runners/*``, executed by each library's own venv
python) and the libraries alternate (ours, upstream, mosaic, ours, upstream, mosaic, ...) inside a
workload, so slow drifts of a noisy machine hit all of them alike. See ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks._config import FULL, LIBS, QUICK, ROWS, Row, Sizes, runs_on, select_rows
from benchmarks._exec import Job, python_for, run_batch, run_once, use_baseline, use_python
from benchmarks._inputs import (
    Inputs,
    ensure_inputs,
    evict_page_cache,
    folder_bytes,
    warm_code,
    warm_page_allocator,
    warm_page_cache,
)
from benchmarks._report import (
    Limits,
    baseline_table,
    machine_info,
    render,
    summarize,
    write_report,
)
from benchmarks._venvs import build_baseline, build_peer

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "benchmarks" / "out"
DOCS = ROOT / "docs" / "benchmarks.md"
TEMPLATE = ROOT / "benchmarks" / "report_template.md"
BUCKET = "bench"
S3_THREADS = 4
CHEAP_ROUND_S = 30.0
EXTRA_ROUNDS = 2
# The machine-noise reference: workload 1's records (528 bytes each as stored), two passes (about
# as long as a stream-local-w2 epoch of ours).
NOISE_RECORD_BYTES = 528
NOISE_PASSES = 2
SCALE_SAMPLES_PER_CHUNK = 4

NOTES = [
    "Upstream 0.2.76 downloads S3 chunks with obstore, whose client it builds without `allow_http`, so it "
    "fails on a plain-http endpoint (`BadScheme`). Workaround used: the runner sets `allow_http=True` in "
    "upstream's `litdata.streaming.downloader._OBSTORE_CLIENT_OPTIONS` before streaming (obstore stays "
    "installed, so upstream runs its shipped obstore path; `index.json` goes through boto3 as shipped).",
    "MosaicML Streaming runs without torchvision (its PyPI wheels do not import beside this CPU torch); an "
    "empty stand-in package satisfies its import-time `import torchvision`.",
    "The S3-compatible server is moto_server (moto[server], pure Python, in-memory) on 127.0.0.1, one "
    "process for the whole suite; the object-storage rows' machine limit is its own bandwidth.",
]


@dataclass
class Context:
    """Everything a run needs to build its parameters."""

    sizes: Sizes
    out: Path
    inputs: Inputs
    libs: list[str]
    datasets: dict[str, Path] = field(default_factory=dict)  # records-litdata, records-mds, tokens-...
    s3: dict[str, str] | None = None  # endpoint, key, secret, region (url added per dataset)
    cloud: dict[str, str] | None = None  # the same through the cloud-shaped proxy
    server: Any = None  # the S3 server (tests.support.servers.S3Server)
    proxy: Any = None  # that proxy (counts the GETs and bytes of a run)
    counter: int = 0

    def work_dir(self, label: str) -> Path:
        self.counter += 1
        return self.out / "runs" / f"{self.counter:04d}-{label}"


def _fmt(lib: str) -> str:
    return "mds" if lib == "mosaic" else "litdata"


RECORDS_READERS = {"stream", "stream-combined", "random-access"}  # the row kinds that read workload 1's dataset


def params_for(row: Row, lib: str, ctx: Context, work: Path) -> dict[str, Any]:
    """The runner parameters of ``row`` for ``lib`` (``work`` is the run's scratch folder)."""
    s = ctx.sizes
    optimize = {
        "out_dir": str(work / "optimized"),
        "workers": s.workers,
        "chunk_bytes": row.chunk_bytes or s.chunk_bytes,
        "start_method": row.start_method,
    }
    if row.kind == "optimize-records" and row.data == "small":
        return {**optimize, "n": s.small_records, "chunk_bytes": s.small_chunk_bytes}
    if row.kind == "optimize-records":
        return {**optimize, "n": s.records}
    if row.kind in ("optimize-images", "optimize-bytes"):
        return {**optimize, "images_dir": str(ctx.inputs.images)}
    if row.kind == "tokens-optimize":
        return {
            **optimize,
            "chunk_bytes": s.chunk_tokens * 4,
            "tokens_dir": str(ctx.inputs.tokens),
            "total_tokens": s.total_tokens,
            "chunk_tokens": s.chunk_tokens,
            "doc_tokens": s.doc_tokens,
            "block": s.block,
        }
    if row.kind in ("stream", "stream-combined"):
        dataset = f"{row.data}-{_fmt(lib)}"
        copies = 2 if row.kind == "stream-combined" else 1
        count = copies * row.epochs
        n = _samples(row.data, s)
        labels = row.data == "images"  # a label is n % 1000 (see _inputs); records carry their index
        params: dict[str, Any] = {
            "input": str(ctx.datasets[dataset]),
            "num_workers": row.num_workers,
            "batch_size": s.image_batch if labels else s.stream_batch,
            "copies": copies,
            "epochs": row.epochs,
            "images": labels,
            "key": "label" if labels else "index",
            "expected": count * n,
            "expected_sum": count * (sum(i % 1000 for i in range(n)) if labels else n * (n - 1) // 2),
            "work_s": row.work_ms / 1000,
        }
        if row.s3:
            endpoint = ctx.cloud if row.cloud else ctx.s3
            assert endpoint is not None
            params["s3"] = {**endpoint, "url": f"s3://{BUCKET}/{dataset}"}
            params["input"] = params["s3"]["url"]
            params["cache_dir"] = str(work / "cache")
        if row.cache_cap is not None:
            params["max_cache_bytes"] = int(row.cache_cap * dataset_bytes(ctx.datasets[dataset]))
        return params
    if row.kind == "tokens-stream":
        return {
            "input": str(ctx.datasets[f"tokens-{_fmt(lib)}"]),
            "block": s.block,
            "batch_size": s.tokens_batch,
            "num_workers": 0,
        }
    if row.kind == "random-access":
        return {"input": str(ctx.datasets[f"records-{_fmt(lib)}"]), "n": s.random_reads, "seed": 0}
    if row.kind == "scale":
        folders = {str(n): str(ctx.datasets[f"scale-{n}"]) for n in s.scale_chunks}
        return {"folders": folders, "batch_size": s.stream_batch, "samples_per_chunk": SCALE_SAMPLES_PER_CHUNK}
    if row.kind == "raw-files":
        return {
            "input": str(ctx.inputs.raw),
            "cache_dir": str(work / "cache"),
            "batch_size": s.raw_batch,
            "num_workers": 0,
            "expected": s.raw_files,
        }
    raise ValueError(row.kind)


def _samples(data: str, s: Sizes) -> int:
    return {"records": s.records, "images": s.images, "small": s.small_records}[data]


def dataset_bytes(folder: Path) -> int:
    """The bytes of a written dataset (its chunks and index), without the harness's marker."""
    return folder_bytes(folder) - (folder / ".bench-ready").stat().st_size


def chunk_sizes(folder: Path) -> list[int]:
    """The sizes of a dataset's chunk files (LitData ``.bin``, MDS ``.mds``, in sub-folders too)."""
    return [p.stat().st_size for p in folder.rglob("*") if p.suffix in (".bin", ".mds")]


# -- preparing the datasets the read workloads stream ---------------------------------------------
PREP = {
    "records": Row("prep", "optimize-records", ""),
    "images": Row("prep", "optimize-images", ""),
    "small": Row("prep", "optimize-records", "", data="small"),
    "tokens": Row("prep", "tokens-optimize", ""),
}


def prepare_datasets(ctx: Context, rows: list[Row], limits_wanted: bool) -> None:
    """Write the datasets the rows read once (LitData format by upstream's optimize when upstream
    is benchmarked, else by ours; MDS by Mosaic)."""
    if any(row.kind == "scale" for row in rows):
        for chunks in ctx.sizes.scale_chunks:
            ctx.datasets[f"scale-{chunks}"] = write_scale_dataset(ctx.out / "data" / f"scale-{chunks}", chunks)
    needed = {row.data for row in rows if row.kind in RECORDS_READERS}
    if "tokens-stream" in {row.kind for row in rows}:
        needed.add("tokens")
    if limits_wanted:
        needed |= {"records", "tokens"}
    litdata_writer = "upstream" if "upstream" in ctx.libs else "ours"
    writers = [("litdata", litdata_writer)] + ([("mds", "mosaic")] if "mosaic" in ctx.libs else [])
    jobs = [(f"{data}-{fmt}", writer, PREP[data]) for data in PREP if data in needed for fmt, writer in writers]
    for name, writer, row in jobs:
        target = ctx.out / "data" / f"{name}-by-{writer}"
        ctx.datasets[name] = target
        if (target / ".bench-ready").exists():
            continue
        print(f"[data] writing {_show(target)} with {writer} ...", flush=True)
        shutil.rmtree(target, ignore_errors=True)
        work = ctx.work_dir(f"prep-{name}")
        params = params_for(row, writer, ctx, work)
        params["out_dir"] = str(target)
        result = run_once(
            writer,
            row.kind,
            params,
            work=work,
            timeout=ctx.sizes.timeout * 3,
            log=ctx.out / "logs" / f"prep-{name}.log",
        )
        if not result.get("ok"):
            raise SystemExit(f"preparing {name} with {writer} failed: {result}; see {ctx.out / 'logs'}")
        (target / ".bench-ready").write_text(json.dumps({"writer": writer, "impl": result.get("impl")}))


def write_scale_dataset(target: Path, chunks: int) -> Path:
    """The scale row's dataset: ``chunks`` chunks of 4 samples ``{"i": int, "x": int32[4]}`` (ours' BinaryWriter)."""
    if (target / ".bench-ready").exists():
        return target
    import numpy as np

    from litdata_format import BinaryWriter

    print(f"[data] writing {_show(target)} ({chunks} chunks) ...", flush=True)
    shutil.rmtree(target, ignore_errors=True)
    writer = BinaryWriter(target, chunk_size=SCALE_SAMPLES_PER_CHUNK)
    for i in range(chunks * SCALE_SAMPLES_PER_CHUNK):
        writer.add_item(i, {"i": i, "x": np.full(4, i, dtype=np.int32)})
    writer.done()
    writer.merge()
    (target / ".bench-ready").write_text(json.dumps({"writer": "ours", "impl": "BinaryWriter(chunk_size=4)"}))
    return target


def upload_datasets(ctx: Context, server: Any) -> None:
    """Copy the datasets the streaming rows read into the server's bucket (moto keeps them in memory)."""
    client = server.client()
    server.create_bucket(BUCKET)
    for name, folder in ctx.datasets.items():
        if name.startswith(("tokens", "scale")):
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.name != ".bench-ready":
                client.upload_file(str(path), BUCKET, f"{name}/{path.relative_to(folder).as_posix()}")


# -- the limits (workload 8) ----------------------------------------------------------------------
def file_sets(ctx: Context) -> dict[str, Path]:
    sets = {"images (input)": ctx.inputs.images, "tokens .npy (input)": ctx.inputs.tokens, "raw files": ctx.inputs.raw}
    sets.update({name: path for name, path in ctx.datasets.items()})
    return sets


def measure_limits(ctx: Context, rounds: int, record: Any) -> None:
    for round_ in range(rounds):
        for name, folder in file_sets(ctx).items():
            work = ctx.work_dir("limit")
            result = run_once(
                "limits",
                "page-cache",
                {"dir": str(folder)},
                work=work,
                timeout=ctx.sizes.timeout,
                log=_log(ctx, "limit", name, round_),
            )
            record({"row": f"limit:{name}", "lib": "limits", "round": round_, **result})
        if ctx.s3 is None:
            continue
        for name in ("records-litdata", "records-mds"):
            if name not in ctx.datasets:
                continue
            work = ctx.work_dir("limit-s3")
            params = {"s3": {**ctx.s3, "url": f"s3://{BUCKET}/{name}"}, "threads": S3_THREADS}
            result = run_once(
                "limits",
                "s3-server",
                params,
                work=work,
                timeout=ctx.sizes.timeout,
                log=_log(ctx, "limit-s3", name, round_),
            )
            record({"row": f"limit-s3:{name}", "lib": "limits", "round": round_, **result})


def limits_from(records: list[dict[str, Any]], ctx: Context) -> Limits:
    """Workload 8's numbers out of the run records."""
    limits = Limits()
    for name, folder in file_sets(ctx).items():
        limits.sizes[name] = folder_bytes(folder)
    for rec in records:
        if not rec.get("ok") or not rec["row"].startswith(("limit", "noise:")):
            continue
        kind, _, name = rec["row"].partition(":")
        rate = rec["bytes"] / rec["elapsed_s"]
        if kind == "noise":
            limits.noise.setdefault(name, []).append(rec["elapsed_s"])
        elif kind == "limit":
            limits.page_cache.setdefault(name, []).append(rate)
            limits.files_per_s.setdefault(name, []).append(rec["items"] / rec["elapsed_s"])
        else:
            limits.s3.setdefault(name, []).append(rate)
            limits.sizes["s3:" + name] = rec["bytes"]
    return limits


def _log(ctx: Context, row: str, lib: str, round_: int) -> Path:
    return ctx.out / "logs" / f"{row}-{lib.replace(' ', '_').replace('/', '_')}-r{round_}.log"


def _run_row(ctx: Context, row: Row, lib: str, params: dict[str, Any], work: Path, log: Path) -> dict[str, Any]:
    """One run of ``row`` for ``lib``, in the interpreter state the row asks for (bytecode, torch first)."""
    flags = {"nopyc": row.nopyc, "torch_first": row.torch_first}
    return run_once(lib, row.kind, params, work=work, timeout=ctx.sizes.timeout, log=log, **flags)


def row_files(rows: list[Row], ctx: Context) -> dict[tuple[str, str], tuple[str | None, float | None]]:
    """(row, lib) -> the file set it reads and the bytes of it per counted item (for the fractions)."""
    s = ctx.sizes
    sizes = {name: folder_bytes(path) for name, path in file_sets(ctx).items()}
    out: dict[tuple[str, str], tuple[str | None, float | None]] = {}
    for row in rows:
        for lib in ctx.libs:
            fmt = _fmt(lib)
            name: str | None = None
            count = 1
            if row.kind in ("optimize-images", "optimize-bytes"):
                name, count = "images (input)", s.images
            elif row.kind == "tokens-optimize":
                name, count = "tokens .npy (input)", s.total_tokens
            elif row.kind in RECORDS_READERS:
                name, count = f"{row.data}-{fmt}", _samples(row.data, s)
            elif row.kind == "tokens-stream":
                name, count = f"tokens-{fmt}", s.total_tokens
            elif row.kind == "raw-files":
                name, count = "raw files", s.raw_files
            if name is not None and name in sizes:
                out[(row.name, lib)] = (name, sizes[name] / count)
    return out


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _progress(row: Row, lib: str, round_: int, rounds: int, result: dict[str, Any]) -> None:
    if result.get("ok"):
        text = f"{result['items'] / result['elapsed_s']:,.0f} {row.unit} ({result['elapsed_s']:.2f} s)"
    else:
        text = f"{result.get('status')} ({result.get('error', '')})"
    print(f"[{row.name}] round {round_ + 1}/{rounds} {lib:8s} {text}", flush=True)


def run_rounds(ctx: Context, rows: list[Row], rounds: int, record: Any) -> None:
    """The measurement: per workload, rounds of ours, upstream, mosaic, each run a fresh process.

    A row whose rounds take under ``CHEAP_ROUND_S`` of wall time each gets ``EXTRA_ROUNDS`` more:
    its measured sections are (sub-)second ones, the noisiest, and more rounds cost little. A row
    with a spread goal also runs the machine-noise reference in every round, so the report can
    show how much the machine itself varied over the same stretch of time.
    """
    files = row_files(rows, ctx)
    folders = file_sets(ctx)
    code = code_roots(ctx.libs)
    for row in rows:
        planned = rounds
        round_ = 0
        while round_ < planned:
            spent = 0.0  # the libraries' runs only: warming and the noise reference do not count
            for lib in ctx.libs:
                if not runs_on(row, lib):
                    continue
                warm_code(code)
                name, _ = files.get((row.name, lib), (None, None))
                if name is not None and row.cold:
                    evict_page_cache(folders[name])  # the run reads its files from the disk
                elif name is not None and not row.s3:
                    warm_page_cache(folders[name])  # every run reads its files from the page cache
                if "optimize" in row.kind:
                    warm_page_allocator(ctx.out / "runs", ctx.sizes.warm_write_bytes)  # every run writes alike
                work = ctx.work_dir(f"{row.name}-{lib}")
                params = params_for(row, lib, ctx, work)
                if row.cloud:
                    ctx.proxy.clear()
                log = _log(ctx, row.name, lib, round_)
                result = _run_row(ctx, row, lib, params, work, log)
                if row.cache_cap is not None and result.get("ok"):
                    result.update(cache_work(row, lib, ctx, params, result))
                record({"row": row.name, "lib": lib, "round": round_, **result})
                _progress(row, lib, round_, planned, result)
                spent += result["process_s"]
            if row.spread is not None:
                warm_code(code)
                work = ctx.work_dir("noise")
                params = {"records": ctx.sizes.records, "record_bytes": NOISE_RECORD_BYTES}
                params.update(batch=ctx.sizes.stream_batch, passes=NOISE_PASSES)
                log = _log(ctx, f"noise-{row.name}", "limits", round_)
                result = run_once("limits", "machine-noise", params, work=work, timeout=ctx.sizes.timeout, log=log)
                record({"row": f"noise:{row.name}", "lib": "limits", "round": round_, **result})
            if round_ == 0 and spent < CHEAP_ROUND_S:
                planned = rounds + EXTRA_ROUNDS
            round_ += 1


def cache_work(row: Row, lib: str, ctx: Context, params: dict[str, Any], result: dict[str, Any]) -> dict[str, float]:
    """What a capped-cache run cost its cache, from the proxy's counts of that run alone: chunk GETs
    and bytes fetched per chunk and epoch (1.0: every chunk fetched once an epoch), CPU per chunk,
    (the run's process tree) and the cap with the allowance the goal gives (one chunk per worker).
    The bytes include the index.json reads."""
    folder = ctx.datasets[f"{row.data}-{_fmt(lib)}"]
    sizes = chunk_sizes(folder)
    fetched = len(sizes) * row.epochs
    gets = [path for method, path, _ in ctx.proxy.requests("GET") if path.endswith((".bin", ".mds"))]
    cap = params["max_cache_bytes"]
    return {
        "cap_bytes": cap,
        "allowed_bytes": cap + max(1, row.num_workers) * max(sizes),
        "chunks": len(sizes),
        "gets_per_chunk": len(gets) / fetched,
        "bytes_per_chunk_byte": ctx.proxy.sent_bytes / (sum(sizes) * row.epochs),
        "cpu_ms_per_chunk": 1e3 * result["cpu_s"] / fetched,
    }


def start_s3(ctx: Context, stack: ExitStack, *, cloud: bool) -> None:
    """Start the S3 server (and, if ``cloud``, the cloud-shaped proxy in front of it) for the rest of
    ``stack``, upload the prepared datasets and point ``ctx`` at both."""
    from tests.support.fault_proxy import FaultProxy
    from tests.support.servers import start_moto

    server = ctx.server = stack.enter_context(start_moto())
    upload_datasets(ctx, server)
    ctx.s3 = {"endpoint": server.endpoint, "key": server.access_key, "secret": server.secret_key}
    ctx.s3["region"] = server.region
    if cloud:
        proxy = FaultProxy(server.endpoint, latency=ctx.sizes.latency_s, bandwidth=ctx.sizes.bandwidth)
        ctx.proxy = stack.enter_context(proxy)
        ctx.cloud = {**ctx.s3, "endpoint": proxy.endpoint}


def code_roots(libs: list[str]) -> list[Path]:
    """Where the runs' code lives: each venv's site-packages, the base interpreter's standard
    library, and this workspace's packages."""
    roots = [ROOT / "packages", Path(sys.base_prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"]
    for lib in [*libs, "limits"]:
        venv = Path(python_for(lib)).parent.parent  # <venv>/bin/python, not resolved (a symlink)
        roots.extend(sorted(venv.glob("lib/python*/site-packages")))
        if lib == "baseline":
            roots.append(venv.parent / "packages")  # its workspace packages, installed editable
    return list(dict.fromkeys(roots))


def run_quick(ctx: Context, rows: list[Row], record: Any) -> None:
    """``--quick``: each library runs all its workloads in one process (fast; not a measurement).

    A row without compiled bytecode runs in a process of its own, as that is what it measures.
    """
    for lib in ctx.libs:
        jobs: list[Job] = []
        for row in rows:
            if (row.nopyc or row.torch_first) and runs_on(row, lib):
                work = ctx.work_dir(f"{row.name}-{lib}")
                params = params_for(row, lib, ctx, work)
                log = _log(ctx, row.name, lib, 0)
                result = _run_row(ctx, row, lib, params, work, log)
                record({"row": row.name, "lib": lib, "round": 0, **result})
                _progress(row, lib, 0, 1, result)
            elif runs_on(row, lib):
                work = ctx.work_dir(f"{row.name}-{lib}")
                jobs.append((row.name, row.kind, params_for(row, lib, ctx, work), work))
        if not jobs:
            continue
        results = run_batch(
            lib, jobs, folder=ctx.out / "runs", timeout=ctx.sizes.timeout, log=_log(ctx, "quick-batch", lib, 0)
        )
        for row in rows:
            if row.name in results:
                record({"row": row.name, "lib": lib, "round": 0, **results[row.name]})
                _progress(row, lib, 0, 1, results[row.name])


# -- main -----------------------------------------------------------------------------------------
def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes and 1 round: a smoke test")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per workload (default 3, --quick 1)")
    parser.add_argument("--only", default=None, help="comma-separated workloads or prefixes (and/or 'limits')")
    parser.add_argument("--libs", default=",".join(LIBS), help="comma-separated: ours,upstream,mosaic")
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="REV",
        help="also run ours at git revision REV (its own worktree and venv), interleaved with ours in every round",
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds before a run counts as a stall")
    parser.add_argument(
        "--upstream-python",
        default=None,
        help="run upstream with this python (a venv with litdata 0.2.76) instead of building its side venv",
    )
    parser.add_argument(
        "--report", type=Path, default=None, help="the Markdown to write (default: docs/benchmarks.md; --quick: out/)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="where inputs, datasets, logs and raw results go")
    parser.add_argument(
        "--from-results", type=Path, default=None, help="only re-render the report from an earlier results-*.jsonl"
    )
    return parser.parse_args(argv)


def _notes(ctx: Context, quick: bool, meta: dict[str, Any], results_path: Path) -> list[str]:
    load_start, load_end = meta.get("load_start", []), meta.get("load_end", [])
    notes = []
    if quick:
        notes.append(
            "--quick: tiny sizes, 1 round, each library ran all its workloads in ONE process: a smoke test of "
            "the harness, not a measurement (upstream's stream-s3-cold-w2 fails in that mode, after the w0 run "
            "started obstore in the same process; it passes in a fresh process, as the full suite runs it)."
        )
    notes += NOTES
    notes.append(
        f"Sizes: {ctx.sizes.key()} (records, images x side, tokens x files, raw files, chunk bytes, "
        "block x blocks per chunk)."
    )
    writers = [
        f"{name}: {json.loads((path / '.bench-ready').read_text())['writer']}"
        for name, path in ctx.datasets.items()
        if (path / ".bench-ready").exists()
    ]
    notes.append("The datasets the read workloads stream were written by " + ", ".join(writers) + ".")
    notes.append(
        "Load average (1/5/15 min) at the start: "
        + "/".join(f"{x:.2f}" for x in load_start)
        + ", at the end: "
        + "/".join(f"{x:.2f}" for x in load_end)
        + f" ({os.cpu_count()} cores; other work on the machine makes the numbers noisier)."
    )
    notes.append(
        f"Suite wall time: {meta.get('wall_min', 0):.1f} min; per-run logs in {_show(ctx.out / 'logs')}, "
        f"raw results in {_show(results_path)}."
    )
    return notes


def _report(ctx: Context, records: list[dict[str, Any]], quick: bool, results_path: Path, report_path: Path) -> None:
    meta: dict[str, Any] = {}
    for rec in records:
        if rec["row"] == "meta":
            meta.update({k: v for k, v in rec.items() if k not in ("row", "lib")})
    runs = [r for r in records if r["row"] not in ("meta",) and not r["row"].startswith(("limit", "noise:"))]
    names = {r["row"] for r in runs}
    rows = [row for row in ROWS if row.name in names]
    cells = summarize(runs)
    context = {
        "libs": [lib for lib in ctx.libs if lib != "baseline"],
        "machine": meta.get("machine") or machine_info(ROOT),
        "mode": "quick" if quick else "full",
        "rounds": meta.get("rounds", 1),
        "command": meta.get("command", ""),
        "notes": _notes(ctx, quick, meta, results_path),
        "sections": baseline_table(rows, runs, meta["baseline"]) if "baseline" in meta else [],
        "records": runs,
        "scale_sizes": list(ctx.sizes.scale_chunks),
        "images": report_path.parent / "img",  # the plots, beside the page
        "image_link": "img",
    }
    generated = render(rows, cells, limits_from(records, ctx), row_files(rows, ctx), context)
    write_report(report_path, generated, TEMPLATE.read_text())
    print(generated)
    print(f"\nwrote {report_path}", flush=True)


def _existing_datasets(out: Path) -> dict[str, Path]:
    found = {}
    for folder in sorted((out / "data").glob("*-by-*")):
        if (folder / ".bench-ready").exists():
            found[folder.name.split("-by-")[0]] = folder
    return found


def rerender(results_path: Path, report: Path | None) -> int:
    """Write the report again from an earlier run's raw results (no benchmark runs)."""
    records = [json.loads(line) for line in results_path.read_text().splitlines() if line.strip()]
    out = results_path.resolve().parent
    quick = out.name == "quick"
    sizes = QUICK if quick else FULL
    libs = [lib for lib in ("ours", "baseline", *LIBS[1:]) if any(r.get("lib") == lib for r in records)]
    inputs = Inputs(out / "inputs", out / "inputs" / "images", out / "inputs" / "tokens", out / "inputs" / "raw")
    ctx = Context(sizes=sizes, out=out, inputs=inputs, libs=libs, datasets=_existing_datasets(out))
    _report(ctx, records, quick, results_path, report or (out / "benchmarks.md" if quick else DOCS))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.from_results:
        return rerender(args.from_results, args.report)
    sizes = QUICK if args.quick else FULL
    if args.timeout:
        sizes = replace(sizes, timeout=args.timeout)
    rounds = args.rounds or (1 if args.quick else 3)
    libs = [lib for lib in LIBS if lib in {x.strip() for x in args.libs.split(",")}]
    if not libs:
        raise SystemExit(f"--libs: choose from {', '.join(LIBS)}")
    rows, limits_wanted = select_rows(args.only)
    out = args.out.resolve() / ("quick" if args.quick else "full")
    started = time.monotonic()
    command = " ".join(
        ["uv run python -m benchmarks.run", *(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))]
    )

    if args.upstream_python:
        use_python("upstream", args.upstream_python)
    for lib in libs:
        if lib != "ours" and not (lib == "upstream" and args.upstream_python):
            build_peer(lib)
    baseline = build_baseline(args.baseline) if args.baseline else None
    if baseline is not None:
        use_baseline(baseline)
        libs.insert(1, "baseline")  # right after ours in every round
    if limits_wanted or any(row.kind != "scale" for row in rows):
        inputs = ensure_inputs(out, sizes)
    else:  # the scale row writes its own datasets: no images, tokens or raw files to generate
        inputs = Inputs(out / "inputs", out / "inputs" / "images", out / "inputs" / "tokens", out / "inputs" / "raw")
    ctx = Context(sizes=sizes, out=out, inputs=inputs, libs=libs)
    shutil.rmtree(out / "runs", ignore_errors=True)
    shutil.rmtree(out / "logs", ignore_errors=True)
    prepare_datasets(ctx, rows, limits_wanted)

    results_path = out / f"results-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    records: list[dict[str, Any]] = []

    def record(rec: dict[str, Any]) -> None:
        records.append(rec)
        with results_path.open("a") as sink:
            sink.write(json.dumps(rec) + "\n")

    record(
        {
            "row": "meta",
            "lib": "",
            "command": command,
            "rounds": rounds,
            "load_start": os.getloadavg(),
            "machine": machine_info(ROOT),
            **({"baseline": baseline.title} if baseline is not None else {}),
        }
    )
    with ExitStack() as stack:
        if any(row.s3 for row in rows) or limits_wanted:
            start_s3(ctx, stack, cloud=any(row.cloud for row in rows))
        if limits_wanted:
            print("[limits] page cache and S3 server bandwidth", flush=True)
            measure_limits(ctx, rounds, record)
        if args.quick:
            run_quick(ctx, rows, record)
        else:
            run_rounds(ctx, rows, rounds, record)
    record({"row": "meta", "lib": "", "load_end": os.getloadavg(), "wall_min": (time.monotonic() - started) / 60})
    report_path = args.report or (out / "benchmarks.md" if args.quick else DOCS)
    _report(ctx, records, args.quick, results_path, report_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
