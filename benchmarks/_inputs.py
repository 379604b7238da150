"""The raw inputs, generated once per size under ``benchmarks/out/<sizes>/inputs`` (deterministic).

* ``images/``: JPEG files (smooth gradients plus noise, quality 90, ~15-25 KB each), named
  ``img-<n>.jpg``, the label is ``n % 1000``.
* ``tokens/``: ``.npy`` shards of int32 token ids below 50257.
* ``raw/``: small files of random bytes (1 KB to ``raw_max_bytes``) in 10 sub-folders.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks._config import Sizes

__all__ = ["Inputs", "ensure_inputs", "folder_bytes"]

VOCAB = 50257


@dataclass(frozen=True)
class Inputs:
    """Where the generated inputs are."""

    root: Path
    images: Path
    tokens: Path
    raw: Path


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def warm_page_cache(folder: Path) -> None:
    """Read every file under ``folder`` once, so the next run finds them in the page cache.

    This machine's kernel pages out file pages nobody touched for about a minute (DAMON's
    ``pageout`` scheme on unmapped pages), so without this the first run of a workload after
    another one reads its files from disk and the libraries after it do not.
    """
    _read_through(sorted(p for p in folder.rglob("*") if p.is_file()))


def evict_page_cache(folder: Path) -> None:
    """Drop every file under ``folder`` from the page cache, so the next run reads them from the disk.

    ``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file after an ``fsync`` (clean pages are dropped;
    no privilege needed, and other processes' files are left alone, unlike ``drop_caches``).
    """
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        with contextlib.suppress(OSError):
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.fsync(descriptor)
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(descriptor)


def warm_page_allocator(folder: Path, nbytes: int) -> None:
    """Write ``nbytes`` into a file under ``folder`` and delete it, just before a run that writes.

    On this VM, writing into pages the kernel has not used for a while costs 3-4x the system time
    of writing into pages a deleted file just gave back (the host backs guest memory lazily, and
    the free pages reporting gives idle ones back to it): one optimize run of 250 MB took 0.5 or
    2 s of system time depending on what the run before it had freed, so libraries that alternate
    took turns being slow. Every writing run now starts after the same freshly freed pages.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".warm-page-allocator"
    block = bytes(8 << 20)
    try:
        with open(path, "wb", buffering=0) as sink:
            for _ in range(max(1, -(-nbytes // len(block)))):
                sink.write(block)
    finally:
        path.unlink(missing_ok=True)


def _read_through(paths: Iterable[str | Path]) -> None:
    """Read each file once (into a reused buffer); a file that cannot be read is skipped."""
    buffer = bytearray(8 << 20)
    for path in paths:
        with contextlib.suppress(OSError), open(path, "rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass


_CODE_SUFFIXES = (".py", ".pyc", ".so")
# Test suites and triton are never loaded here. The nvidia/ libraries are: PyPI's torch maps its
# CUDA libraries (~2.5 GB) at import even without a GPU. Skipping them made the first run after
# Mosaic's 40 s epochs import torch from disk (seen: 41.9 s of wall time for 2.4 s of CPU, 318
# major faults), and ours always runs first.
_NOT_CODE_DIRS = {"triton", "tests", "test"}
CODE_REFRESH_S = 30.0
_code_warmed_at = -CODE_REFRESH_S


def warm_code(roots: list[Path]) -> None:
    """Read the interpreters' code (``.py``, ``.pyc``, ``.so``) under ``roots`` into the page cache,
    at most every ``CODE_REFRESH_S`` seconds.

    The kernel's idle-page eviction (see ``warm_page_cache``) also takes the libraries' code while
    a long run of another library goes on; a run that then imports, or first calls into torch,
    reads it from disk (seen: a 0.5 s epoch with a 0.18 s first batch instead of 0.25 s and 0.04 s).
    Called between runs, never during one.
    """
    global _code_warmed_at
    if time.monotonic() - _code_warmed_at < CODE_REFRESH_S:
        return
    _read_through(_code_files(roots))
    _code_warmed_at = time.monotonic()


def _code_files(roots: list[Path]) -> Iterator[str]:
    for root in roots:
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [d for d in subfolders if d not in _NOT_CODE_DIRS]
            for name in names:
                if name.endswith(_CODE_SUFFIXES) or ".so." in name:
                    yield os.path.join(folder, name)


def _image(args: tuple[Path, int, int]) -> None:
    from PIL import Image

    path, index, side = args
    rng = np.random.default_rng(index)
    y, x = np.mgrid[0:side, 0:side].astype(np.float32) / side
    colour = rng.uniform(0, 255, size=(3, 3))
    planes = [colour[c, 0] * x + colour[c, 1] * y + colour[c, 2] * (1 - x) * y for c in range(3)]
    pixels = np.stack(planes, axis=-1) + rng.normal(0, 12, size=(side, side, 3))
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, format="JPEG", quality=90)


def _make_images(folder: Path, sizes: Sizes) -> None:
    folder.mkdir(parents=True)
    jobs = [(folder / f"img-{i:06d}.jpg", i, sizes.image_side) for i in range(sizes.images)]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pool.map(_image, jobs, chunksize=64)


def _make_tokens(folder: Path, sizes: Sizes) -> None:
    folder.mkdir(parents=True)
    per_file = sizes.total_tokens // sizes.token_files
    rng = np.random.default_rng(5)
    for i in range(sizes.token_files):
        np.save(folder / f"part-{i:04d}.npy", rng.integers(0, VOCAB, size=per_file, dtype=np.int32))


def _make_raw(folder: Path, sizes: Sizes) -> None:
    rng = np.random.default_rng(7)
    for i in range(sizes.raw_files):
        sub = folder / f"d{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        size = int(rng.integers(1 << 10, sizes.raw_max_bytes + 1))
        (sub / f"file-{i:06d}.bin").write_bytes(rng.bytes(size))


def ensure_inputs(out: Path, sizes: Sizes) -> Inputs:
    """Generate the inputs for ``sizes`` unless they exist already."""
    root = out / "inputs"
    inputs = Inputs(root, root / "images", root / "tokens", root / "raw")
    marker = root / ".ready.json"
    if marker.exists() and json.loads(marker.read_text()).get("sizes") == sizes.key():
        return inputs
    print(f"[inputs] generating under {root} ...", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    _make_images(inputs.images, sizes)
    _make_tokens(inputs.tokens, sizes)
    _make_raw(inputs.raw, sizes)
    marker.write_text(json.dumps({"sizes": sizes.key()}))
    return inputs
