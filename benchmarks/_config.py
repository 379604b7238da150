"""The workloads (rows of the report) and their sizes, full and ``--quick``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

__all__ = ["FULL", "LIBS", "QUICK", "ROWS", "Row", "Sizes", "runs_on", "select_rows"]

LIBS = ("ours", "upstream", "mosaic")


@dataclass(frozen=True)
class Sizes:
    """How big every input is; scaled so the full suite runs in about 20 minutes on 2 cores."""

    records: int = 200_000  # optimize-records samples: {"index": int, "tokens": int32[128]}
    images: int = 10_000  # 256x256 JPEG files
    image_side: int = 256
    total_tokens: int = 50_000_000  # int32 tokens for the tokens workloads
    token_files: int = 50  # .npy shards they come in
    doc_tokens: int = 2_000  # tokens per "document" a shard yields
    raw_files: int = 5_000  # small files for raw-files
    raw_max_bytes: int = 16 << 10
    random_reads: int = 10_000  # ds[i] calls for random-access
    chunk_bytes: int = 8 << 20  # chunk / shard size (LitData and MDS) for records and images
    block: int = 2049  # TokensLoader block size
    chunk_blocks: int = 1024  # blocks of tokens per chunk: ~8 MiB
    stream_batch: int = 256
    tokens_batch: int = 16
    raw_batch: int = 32
    workers: int = 2  # optimize workers
    image_batch: int = 64  # stream-s3-latency: decoded 3x256x256 uint8 tensors per batch
    small_records: int = 32_000  # stream-s3-capped: workload 1's records in ...
    small_chunk_bytes: int = 16 << 10  # ... chunks this small: ~1,050 chunks, ~17 MiB
    latency_s: float = 0.03  # the cloud proxy: first-byte delay of every request ...
    bandwidth: float = 50e6  # ... and bytes/s per connection
    timeout: float = 300.0  # a run that takes longer is recorded as a timeout (a stall)
    scale_chunks: tuple[int, ...] = (1_000, 10_000)  # the scale row: datasets of this many 4-sample chunks
    warm_write_bytes: int = 512 << 20  # written and deleted before each optimize run (warm_page_allocator)

    @property
    def chunk_tokens(self) -> int:
        return self.block * self.chunk_blocks

    def key(self) -> str:
        """Names the generated inputs, so other sizes generate their own."""
        return (
            f"r{self.records}-i{self.images}x{self.image_side}-t{self.total_tokens}x{self.token_files}"
            f"-f{self.raw_files}-c{self.chunk_bytes}-b{self.block}x{self.chunk_blocks}"
            f"-s{self.small_records}x{self.small_chunk_bytes}"
            + (f"-k{'x'.join(map(str, self.scale_chunks))}" if self.scale_chunks != (1_000, 10_000) else "")
        )


FULL = Sizes()
QUICK = replace(
    FULL,
    records=4_000,
    images=100,
    total_tokens=400_000,
    token_files=2,
    raw_files=100,
    random_reads=500,
    chunk_bytes=256 << 10,
    chunk_blocks=32,
    small_records=1_000,  # ~145 chunks of 4 KiB: the capped row still cycles its cache (5%: ~7 chunks)
    small_chunk_bytes=4 << 10,
    timeout=60.0,
    scale_chunks=(200, 1_000),
    warm_write_bytes=8 << 20,
)


@dataclass(frozen=True)
class Row:
    """One workload row of the report.

    Attributes:
        name: the row's name (``--only`` takes names or prefixes).
        kind: the runner function that runs it.
        unit: what the rate counts.
        libs: the libraries that have an equivalent (the others show "n/a").
        num_workers: DataLoader workers, for streaming rows.
        s3: read from the local S3-compatible server with a fresh cache.
        cloud: ... through the loopback proxy that gives it a cloud bucket's latency and bandwidth.
        data: the dataset streamed: ``"records"`` (workload 1's), ``"images"`` (workload 2's, decoded
            to tensors in a transform) or ``"small"`` (workload 1's records in small chunks).
        epochs: epochs of one loader per run.
        cache_cap: the cache's byte cap as a fraction of the dataset (None: no cap given).
        target: issue 6's goal for ours: at least this times ...
        against: ... ``"upstream"`` or the ``"fastest peer"``.
        streaming: the peak-RSS goal (the leanest peer's + 10%) applies.
        spread: the goal for ours' run-to-run spread (half the min-max range over the median);
            such a row also runs the machine-noise reference every round (see ``run_rounds``).
        start_method: for optimize rows, the ``start_method`` ours and upstream get (None: each
            library's default, spawn for both; Mosaic's recipe always forks).
        cold: drop the dataset's files from the page cache before each run (the disk is read, as
            for a dataset larger than memory), instead of warming them.
        work_ms: the training step's time per sample, spent in the loop after each batch (a sleep,
            leaving the cores to the workers): what read-ahead overlaps the disk's reads with.
        chunk_bytes: for optimize rows, the chunk size instead of the sizes' ``chunk_bytes``.
        nopyc: run with no compiled bytecode to be found (a fresh, empty ``PYTHONPYCACHEPREFIX``
            per run, the standard library's too): what a venv installed without ``.pyc`` costs.
        torch_first: the run's first line is ``import torch`` (before the clock), as in a data-prep
            script that also imports a tokenizer, torchvision or the model's code.
    """

    name: str
    kind: str
    unit: str
    libs: tuple[str, ...] = LIBS
    num_workers: int = 0
    s3: bool = False
    cloud: bool = False
    data: str = "records"
    epochs: int = 1
    cache_cap: float | None = None
    target: float | None = None
    against: str = "fastest peer"
    streaming: bool = False
    spread: float | None = None
    start_method: str | None = None
    cold: bool = False
    work_ms: float = 0.0
    chunk_bytes: int | None = None
    nopyc: bool = False
    torch_first: bool = False


def _optimize_rows(name: str, kind: str, target: float | None = None, **options: Any) -> tuple[Row, ...]:
    """An optimize row run as a script whose first line is ``import torch`` (issue 46), and two of ours beside it.

    ``-nopyc``: ours again without compiled bytecode; ``-notorch``: ours in a script that never imports torch.
    """
    ours: tuple[str, ...] = ("ours",)
    unit = "tokens/s" if "tokens" in kind else "samples/s"
    return (
        Row(name, kind, unit, target=target, torch_first=True, **options),
        Row(f"{name}-nopyc", kind, unit, libs=ours, torch_first=True, nopyc=True, **options),
        Row(f"{name}-notorch", kind, unit, libs=ours, **options),
    )


ROWS = (
    *_optimize_rows("optimize-records", "optimize-records", target=1.5),
    *_optimize_rows("optimize-images", "optimize-images", target=1.25),
    # Like for like: every library's workers forked (no goal; shows what the start method costs).
    Row("optimize-records-fork", "optimize-records", "samples/s", start_method="fork", torch_first=True),
    Row("optimize-images-fork", "optimize-images", "samples/s", start_method="fork", torch_first=True),
    # Issue 32: the JPEG files' bytes as they are + a label (pre-encoded bytes: a dict written as
    # Arrow rows by ours and upstream, MDS `bytes` by Mosaic), 64 MiB chunks as optimize's default,
    # so a worker's only chunk is built after its last sample.
    *_optimize_rows("optimize-bytes", "optimize-bytes", target=1.25, chunk_bytes=64 << 20),
    Row("stream-local-w0", "stream", "samples/s", target=1.5, against="upstream", streaming=True),
    Row("stream-local-w2", "stream", "samples/s", num_workers=2, target=2.0, streaming=True, spread=0.15),
    # Issue 31: a cold page cache (every chunk read from the disk) under a training step of
    # 20 us per sample, so reads that are asked ahead overlap the step (no goal: read-ahead's gain).
    Row("stream-local-cold-w2", "stream", "samples/s", num_workers=2, cold=True, work_ms=0.02, streaming=True),
    Row("stream-s3-cold-w0", "stream", "samples/s", s3=True, target=1.2, against="upstream", streaming=True),
    Row("stream-s3-cold-w2", "stream", "samples/s", num_workers=2, s3=True, target=1.5, streaming=True),
    *_optimize_rows("tokens-optimize", "tokens-optimize", target=1.25),
    Row("tokens-stream", "tokens-stream", "tokens/s", target=3.0, against="upstream", streaming=True),
    Row("random-access", "random-access", "samples/s", target=1.5),
    Row("raw-files", "raw-files", "files/s", libs=("ours", "upstream"), target=1.5, against="upstream", streaming=True),
    # No goal in issue 6: mixing two datasets costs what per-sample batching costs (Mosaic mixes
    # streams inside one dataset, a different API, so it has no row here).
    Row("stream-combined-w2", "stream-combined", "samples/s", libs=("ours", "upstream"), num_workers=2),
    # Issue 16: a cloud bucket's shape (first-byte latency, per-connection bandwidth) in front of
    # the S3 server; images decoded to tensors in a transform.
    Row("stream-s3-latency-w0", "stream", "samples/s", s3=True, cloud=True, data="images", target=1.5),
    Row("stream-s3-latency-w2", "stream", "samples/s", num_workers=2, s3=True, cloud=True, data="images", target=1.5),
    # Issue 16: >= 1,000 small chunks through a cache capped at 5% of the dataset, 2 epochs.
    Row(
        "stream-s3-capped-w2",
        "stream",
        "samples/s",
        num_workers=2,
        s3=True,
        cloud=True,
        data="small",
        epochs=2,
        cache_cap=0.05,
        target=1.5,
    ),
    # Issue 29: many tiny chunks (BinaryWriter(chunk_size=4), {"i": int, "x": int32[4]}) at two
    # sizes: the open time and the CPU per chunk of a shuffled epoch (num_workers=0); the rate is
    # chunks per CPU-second of the epochs, so its ratio is the per-chunk cost's (see the Scale table).
    Row("scale-small-chunks", "scale", "chunks/cpu-s", libs=("ours", "upstream")),
)


def runs_on(row: Row, lib: str) -> bool:
    """Whether ``lib`` has an equivalent of ``row`` (the baseline is ours at another commit)."""
    return ("ours" if lib == "baseline" else lib) in row.libs


def select_rows(only: str | None) -> tuple[list[Row], bool]:
    """The rows named (or prefixed) in ``only``, and whether the limits (workload 8) are wanted."""
    if not only:
        return list(ROWS), True
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    rows = [row for row in ROWS if any(row.name == w or row.name.startswith(w) for w in wanted)]
    unknown = [w for w in wanted if w != "limits" and not any(r.name.startswith(w) for r in ROWS)]
    if unknown:
        names = ", ".join([r.name for r in ROWS] + ["limits"])
        raise SystemExit(f"unknown workload(s) {unknown}; choose from: {names}")
    return rows, "limits" in wanted
