"""Optimize an ImageNet-style folder of images into litdata chunks, and say how fast and how big.

The folder holds one subfolder per class (``train/n01440764/*.JPEG``, ...); classes are numbered
in sorted order. Each sample is ``{"image": ..., "label": <class number>}``:

- ``--write_mode jpeg`` re-encodes each image as JPEG at ``--quality`` (default 90), after an
  optional ``--resize`` of its shorter side; it streams back as an RGB uint8 tensor (C, H, W);
- ``--write_mode raw`` stores each file's bytes as they are (no decoding while optimizing); it
  streams back as ``bytes`` (``stream_imagenet.py --decode`` decodes them).

Prints the images per second, the output's size and the peak memory of the whole process tree.

    python benchmarks/litdata/optimize_imagenet.py --input_dir /data/imagenet/train \\
        --output_dir /data/imagenet-litdata/train --write_mode jpeg --quality 90 --num_workers 8
    python benchmarks/litdata/optimize_imagenet.py --input_dir /data/imagenet/val \\
        --output_dir s3://my-bucket/imagenet/val --write_mode raw
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from pathlib import Path
from typing import Any

from _peak import PeakMemory

EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


def list_images(input_dir: Path, limit: int | None = None) -> list[tuple[str, int]]:
    """``(path, class number)`` of every image under ``input_dir``'s class folders, in sorted order."""
    classes = sorted(p.name for p in input_dir.iterdir() if p.is_dir())
    if not classes:
        raise SystemExit(f"{input_dir} has no class folders: expected <input_dir>/<class>/<image>.jpg")
    items = [
        (str(path), label)
        for label, name in enumerate(classes)
        for path in sorted((input_dir / name).rglob("*"))
        if path.suffix.lower() in EXTENSIONS
    ]
    if not items:
        raise SystemExit(f"{input_dir}: its class folders hold no images ({', '.join(sorted(EXTENSIONS))})")
    return items[:limit] if limit else items


def to_sample(item: tuple[str, int], write_mode: str, quality: int, resize: int | None) -> dict[str, Any]:
    """One sample: the image as JPEG at ``quality`` (``jpeg``) or the file's bytes (``raw``), and its label."""
    import litdata as ld

    path, label = item
    if write_mode == "raw":
        return {"image": Path(path).read_bytes(), "label": label}
    if resize is None:
        return {"image": ld.Image(path=path, quality=quality, format="jpeg"), "label": label}
    from PIL import Image

    with Image.open(path) as opened:
        image = opened.convert("RGB")
    scale = resize / min(image.size)
    if scale < 1:
        image = image.resize((round(image.width * scale), round(image.height * scale)), Image.Resampling.BILINEAR)
    return {"image": ld.Image(image=image, quality=quality, format="jpeg"), "label": label}


def folder_bytes(output_dir: str) -> int | None:
    """The output's size (local outputs only)."""
    if "://" in output_dir:
        return None
    return sum(p.stat().st_size for p in Path(output_dir).rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--input_dir", type=Path, required=True, help="ImageNet-style: <input_dir>/<class>/<image>")
    parser.add_argument("--output_dir", required=True, help="a local folder or a bucket URL (s3://, gs://, ...)")
    parser.add_argument("--write_mode", choices=["jpeg", "raw"], default="jpeg")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality (--write_mode jpeg)")
    parser.add_argument("--resize", type=int, default=None, help="shrink the shorter side to this many pixels")
    parser.add_argument("--num_workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk_bytes", default="64MB")
    parser.add_argument("--limit", type=int, default=None, help="only the first N images (a trial run)")
    parser.add_argument("--mode", choices=["overwrite", "append"], default=None, help="for an existing output")
    args = parser.parse_args(argv)

    import litdata as ld

    items = list_images(args.input_dir, args.limit)
    fn = functools.partial(to_sample, write_mode=args.write_mode, quality=args.quality, resize=args.resize)
    print(f"optimizing {len(items)} images from {args.input_dir} ({args.write_mode}) -> {args.output_dir}", flush=True)
    started = time.perf_counter()
    with PeakMemory() as peak:
        ld.optimize(fn=fn, inputs=items, output_dir=args.output_dir, chunk_bytes=args.chunk_bytes,
                    num_workers=args.num_workers, mode=args.mode, verbose=False)  # fmt: skip
    elapsed = time.perf_counter() - started
    size = folder_bytes(args.output_dir)
    print(f"images: {len(items)}")
    print(f"elapsed: {elapsed:.2f} s")
    print(f"throughput: {len(items) / elapsed:,.1f} images/s")
    if size is not None:
        print(f"output size: {size / 2**20:,.1f} MiB ({size / len(items) / 1024:,.1f} KiB per image)")
    print(f"peak memory: {peak.bytes / 2**20:,.0f} MiB (summed RSS of the process tree)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
