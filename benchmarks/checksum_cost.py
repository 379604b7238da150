"""What verifying chunk checksums costs a cold stream from S3: ours, this checkout only.

Not a row of the suite: a before/after measure of one change. One dataset is uploaded twice to
a moto S3 server on 127.0.0.1, once with its index as written (checksums recorded: every
download is hashed before it is published) and once with the checksum fields removed from the
index (nothing to check: the code path before checksums). Each round streams both, in
alternating order, with a fresh cache, through a StreamingDataLoader with 0 and 2 workers; the
report is the median rate of each and the median of the per-round ratios (the machine is
shared, so only ratios measured side by side mean anything).

    uv run python benchmarks/checksum_cost.py --rounds 7
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _write(folder: Path, samples: int, sample_bytes: int) -> None:
    from litdata_format import BinaryWriter

    rng = np.random.default_rng(0)
    writer = BinaryWriter(folder, chunk_bytes="16MB")
    for i in range(samples):
        writer.add_item(i, {"index": i, "data": rng.integers(0, 255, sample_bytes, dtype=np.uint8)})
    writer.done()
    writer.merge()


def _cpu() -> float:
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def _stream(url: str, options: dict[str, str], cache: Path, workers: int) -> tuple[float, float]:
    """(samples/s, CPU seconds of this process and its reaped DataLoader workers; the S3 server's
    CPU is not in it, so the shared machine's load moves it far less than the wall time)."""
    from litdata_stream import StreamingDataLoader, StreamingDataset

    shutil.rmtree(cache, ignore_errors=True)
    start, cpu = time.perf_counter(), _cpu()
    dataset = StreamingDataset(url, storage_options=options, cache_dir=str(cache))
    count = sum(len(batch["index"]) for batch in StreamingDataLoader(dataset, batch_size=32, num_workers=workers))
    return count / (time.perf_counter() - start), _cpu() - cpu


def _hash_all(folder: Path) -> float:
    from litdata_format import checksum_file

    start = time.perf_counter()
    for path in folder.glob("chunk-*"):
        checksum_file(path)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--sample-bytes", type=int, default=50_000)
    args = parser.parse_args()
    from litdata_io import get_storage
    from tests.servers import start_moto

    base = Path(tempfile.mkdtemp(prefix="litdata-checksum-cost-"))
    try:
        local = base / "local"
        _write(local, args.samples, args.sample_bytes)
        index = json.loads((local / "index.json").read_text())
        for chunk in index["chunks"]:
            chunk.pop("checksum")
        stripped = json.dumps(index).encode()
        with start_moto() as server:
            options = server.storage_options()
            bucket = server.create_bucket()
            urls = {"checked": f"s3://{bucket}/checked", "unchecked": f"s3://{bucket}/unchecked"}
            for kind, url in urls.items():
                storage = get_storage(url, options)
                for path in sorted(local.iterdir()):
                    if kind == "unchecked" and path.name == "index.json":
                        storage.put("index.json", stripped)
                    else:
                        storage.upload(path, path.name)
            for workers in (0, 2):
                rates: dict[str, list[float]] = {"checked": [], "unchecked": []}
                cpus: dict[str, list[float]] = {"checked": [], "unchecked": []}
                for round_ in range(args.rounds):
                    order = ["checked", "unchecked"] if round_ % 2 == 0 else ["unchecked", "checked"]
                    for kind in order:
                        rate, cpu = _stream(urls[kind], options, base / "cache", workers)
                        rates[kind].append(rate)
                        cpus[kind].append(cpu)
                ratios = [c / u for c, u in zip(rates["checked"], rates["unchecked"])]
                cpu_ratios = [c / u for c, u in zip(cpus["checked"], cpus["unchecked"])]
                print(
                    f"workers={workers}: checked {statistics.median(rates['checked']):.0f} samples/s, "
                    f"unchecked {statistics.median(rates['unchecked']):.0f} samples/s, "
                    f"median ratio checked/unchecked {statistics.median(ratios):.3f} "
                    f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)})",
                    flush=True,
                )
                print(
                    f"  reader CPU checked/unchecked: median {statistics.median(cpu_ratios):.3f} "
                    f"(rounds: {', '.join(f'{r:.3f}' for r in cpu_ratios)})",
                    flush=True,
                )
                # The added work itself, less noisy than the ratio: hashing every chunk once (what a
                # cold stream adds) against the time an unchecked stream takes.
                hashing = min(_hash_all(local) for _ in range(5))
                run = args.samples / statistics.median(rates["unchecked"])
                print(f"  hashing all chunks: {hashing * 1000:.1f} ms = {hashing / run:.1%} of an unchecked run")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
