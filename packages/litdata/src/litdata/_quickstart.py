"""``litdata quickstart``: the whole loop on local disk in a few seconds, no credentials needed.

1. make a small synthetic image + label dataset (``Image`` wrappers, stored as JPEG),
2. ``optimize`` it with worker processes and a progress bar,
3. stream it with ``StreamingDataLoader(num_workers=2)``, stop halfway, save the state dict,
4. resume a fresh loader from that state and finish the epoch,
5. print the samples, the throughput, and whether anything was repeated or lost.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from litdata_format import Image
from litdata_prep import optimize

__all__ = ["make_sample", "run"]


def make_sample(index: int) -> dict[str, Any]:
    """Sample ``index``: a 32x32 RGB image whose colour encodes its label, stored as JPEG."""
    rng = np.random.default_rng(index)
    label = index % 10
    pixels = rng.integers(0, 64, (32, 32, 3), dtype=np.uint8)
    pixels[..., label % 3] += np.uint8(16 * label)
    return {"index": index, "image": Image(array=pixels, quality=90, format="jpeg"), "label": label}


def _indexes(batch: dict[str, Any]) -> list[int]:
    return [int(i) for i in batch["index"]]


def run(args: argparse.Namespace) -> int:
    """Run the quickstart with ``litdata quickstart``'s options; return 0 when every sample was seen exactly once."""
    from litdata_stream import StreamingDataLoader, StreamingDataset

    temp = None if args.output else tempfile.mkdtemp(prefix="litdata-quickstart-")
    root = Path(args.output or temp or ".")
    data_dir = root / "dataset"
    try:
        print(f"1. optimize: {args.samples} synthetic 32x32 images + labels -> {data_dir}")
        start = time.perf_counter()
        optimize(
            make_sample,
            list(range(args.samples)),
            str(data_dir),
            chunk_bytes="256KB",
            num_workers=args.workers,
            mode="overwrite",
        )
        took = time.perf_counter() - start
        size = sum(p.stat().st_size for p in data_dir.glob("chunk-*"))
        chunks = len(list(data_dir.glob("chunk-*")))
        print(f"   {args.samples} samples in {chunks} chunks ({size / 1e6:.2f} MB) in {took:.1f}s")

        def loader() -> Any:
            dataset = StreamingDataset(str(data_dir), shuffle=True, seed=7)
            return StreamingDataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers)

        first = loader()
        total_batches = len(first)
        stop_after = total_batches // 2
        print(f"2. stream: {total_batches} batches of {args.batch_size} with {args.workers} loader workers")
        seen: list[int] = []
        start = time.perf_counter()
        for batch_number, batch in enumerate(first, 1):
            if batch_number == 1:
                shape = tuple(batch["image"].shape)
                print(f"   first batch: image {shape} {batch['image'].dtype}, labels {batch['label'][:8].tolist()}")
            seen += _indexes(batch)
            if batch_number == stop_after:
                break
        state = first.state_dict()
        print(f"   stopped after {stop_after} batches ({len(seen)} samples); state dict saved")
        del first

        resumed = loader()
        resumed.load_state_dict(state)
        rest: list[int] = []
        for batch in resumed:
            rest += _indexes(batch)
        elapsed = time.perf_counter() - start
        print(f"3. resumed from the state dict: {len(rest)} more samples")
        everything = seen + rest
        repeated = len(everything) - len(set(everything))
        lost = sorted(set(range(args.samples)) - set(everything))
        rate = len(everything) / elapsed if elapsed > 0 else float("inf")
        print(f"4. {len(everything)} samples streamed at {rate:,.0f} samples/s (both halves, incl. worker start-up)")
        print(f"   repeated: {repeated}, lost: {len(lost)} -> {'OK' if not repeated and not lost else 'MISMATCH'}")
        return 0 if not repeated and not lost else 1
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
