"""Stream an optimized ImageNet-style dataset (from optimize_imagenet.py) and say how fast.

Reads the dataset from a local folder or a bucket URL with a StreamingDataLoader (``--num_workers``,
``--batch_size``) for ``--epochs`` epochs and prints, per epoch, the images per second and the time
to the first batch, then the peak memory of the whole process tree (workers included). Images are
kept as a list per batch (their sizes differ unless the dataset was written with ``--resize``);
``--decode`` decodes ``--write_mode raw`` bytes with PIL in the workers, as training would.

    python benchmarks/litdata/stream_imagenet.py --input_dir /data/imagenet-litdata/train \\
        --batch_size 256 --num_workers 8 --epochs 2
    python benchmarks/litdata/stream_imagenet.py --input_dir s3://my-bucket/imagenet/val --num_workers 16
"""

from __future__ import annotations

import argparse
import io
import os
import time
from typing import Any

from _peak import PeakMemory


class Collate:
    """A batch as a list of samples; raw bytes decoded with PIL when ``decode`` (in the workers)."""

    def __init__(self, decode: bool) -> None:
        self.decode = decode

    def __call__(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.decode:
            from PIL import Image

            for sample in batch:
                if isinstance(sample["image"], bytes):
                    with Image.open(io.BytesIO(sample["image"])) as image:
                        sample["image"] = image.convert("RGB")
        return batch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--input_dir", required=True, help="a local folder or a bucket URL (s3://, gs://, ...)")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--num_workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--shuffle", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--decode", action="store_true", help="decode raw image bytes with PIL (write_mode raw)")
    parser.add_argument("--cache_dir", default=None, help="where a bucket's chunks are cached")
    parser.add_argument("--max_cache_size", default="100GB")
    args = parser.parse_args(argv)

    import litdata as ld

    dataset = ld.StreamingDataset(args.input_dir, shuffle=args.shuffle, cache_dir=args.cache_dir,
                                  max_cache_size=args.max_cache_size)  # fmt: skip
    loader = ld.StreamingDataLoader(dataset, batch_size=args.batch_size, num_workers=args.num_workers,
                                    collate_fn=Collate(args.decode))  # fmt: skip
    print(f"streaming {len(dataset)} images from {args.input_dir}: {args.num_workers} workers, "
          f"batch {args.batch_size}, {args.epochs} epoch(s)", flush=True)  # fmt: skip
    with PeakMemory() as peak:
        for epoch in range(args.epochs):
            started = time.perf_counter()
            first = None
            images = 0
            for batch in loader:
                if first is None:
                    first = time.perf_counter() - started
                images += len(batch)
            elapsed = time.perf_counter() - started
            print(f"epoch {epoch}: {images} images in {elapsed:.2f} s, throughput: {images / elapsed:,.1f} images/s, "
                  f"first batch: {first if first is not None else float('nan'):.3f} s", flush=True)  # fmt: skip
    print(f"peak memory: {peak.bytes / 2**20:,.0f} MiB (summed RSS of the process tree)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
