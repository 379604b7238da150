"""Cache work per download into a full cache of many chunks: ours, this checkout only.

Not a row of the suite (upstream has no separate cache API to time the same way): a measure of
what one change buys, run before and after it. Every download into a full cache has to make room;
this times ``ChunkCache.use`` + ``mark_consumed`` of new 1 KB chunks from a local folder into a
cache already holding ``--chunks`` of them at its cap, so the time is the cache's own bookkeeping.

    uv run python -m benchmarks.cache_full --chunks 10000
    # the same against an older commit: check it out into a worktree and put its source first
    git worktree add /tmp/old <rev>
    PYTHONPATH=/tmp/old/packages/litdata-io/src uv run python -m benchmarks.cache_full
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from litdata_format import ChunkInfo
from litdata_io import get_storage
from litdata_io._cache._chunk_cache import ChunkCache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000, help="chunks in the full cache")
    parser.add_argument("--downloads", type=int, default=300, help="new chunks to bring in")
    args = parser.parse_args()
    size = 1000
    base = Path(tempfile.mkdtemp(prefix="litdata-cache-full-"))
    try:
        source, folder = base / "source", base / "cache"
        source.mkdir()
        folder.mkdir()
        for i in range(args.chunks):
            (folder / f"chunk-0-{i}.bin").write_bytes(b"x" * size)
        new = range(args.chunks, args.chunks + args.downloads)
        for i in new:
            (source / f"chunk-0-{i}.bin").write_bytes(b"y" * size)
        cache = ChunkCache(folder, get_storage(str(source)), args.chunks * size)
        started = time.perf_counter()
        for i in new:
            info = ChunkInfo(f"chunk-0-{i}.bin", size, 1)
            with cache.use(info):
                pass
            cache.mark_consumed(info)
        elapsed = time.perf_counter() - started
        held = cache.size()
        print(
            f"{args.downloads} downloads into a full cache of {args.chunks} chunks: "
            f"{elapsed / args.downloads * 1e3:.2f} ms each; cache holds {held} of {args.chunks * size} bytes"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
