"""Two ranks of two workers each reading one dataset into one cache on a small disk, and a filler.

Run inside a small disk (``tests/support/small_disk.py``): ``python full_disk_ranks.py <mount> <url> <hold>``.
The two ranks (``RANK``/``WORLD_SIZE`` set, no torch.distributed) share ``<mount>/cache`` with
``max_cache_size`` far above the disk, so the cache alone fills it. Once it has (less than 200 KB
free) and both ranks have had a batch, another file of 150 KB takes what is left
and then what the cache frees, and is kept ``<hold>`` seconds (``-1``: for good). Prints one JSON
line: each rank's samples and error, the staging folders left, and the bytes the file got.
For tests/test_stream_full_disk.py and tests/scripts/full_disk_repeat.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILLER = 150_000

RANK = """
import json, os, sys
from pathlib import Path
from litdata import StreamingDataLoader, StreamingDataset

dataset = StreamingDataset(sys.argv[1], cache_dir=sys.argv[2], max_cache_size="100MB")
seen, error = [], None
try:
    for batch in StreamingDataLoader(dataset, batch_size=4, num_workers=2):
        seen.extend(int(i) for i in batch["i"])
        Path(sys.argv[3], f"ready-{os.environ['RANK']}").touch()
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({"seen": seen, "error": error}))
"""


def _fill(mount: Path, cache: Path, hold: float, ranks: list[subprocess.Popen[str]]) -> int:
    """Once both ranks read and the cache has filled the disk, write a file of ``FILLER`` bytes.

    It takes what the disk has free (~70 KB), then the rest as the cache frees bytes, as a job
    writing a checkpoint would; it is kept ``hold`` s (< 0: until the ranks end), then deleted.
    Returns the bytes it got.
    """
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(rank.poll() is None for rank in ranks):
        if len(list(mount.glob("ready-*"))) == 2 and shutil.disk_usage(mount).free < 200_000:
            break
        time.sleep(0.01)
    filler = mount / "other-file.bin"
    until = time.monotonic() + hold if hold >= 0 else float("inf")
    written = 0
    with open(filler, "wb", buffering=0) as out:
        while time.monotonic() < until and any(rank.poll() is None for rank in ranks):
            try:
                while written < FILLER:
                    written += out.write(bytes(min(4096, FILLER - written)))
            except OSError:
                pass
            time.sleep(0.01)
    filler.unlink()
    return written


def main() -> None:
    mount, url, hold = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    cache = mount / "cache"
    ranks: list[subprocess.Popen[str]] = []
    # Off the small disk (a pipe could fill up while the ranks run); deleted on close.
    logs = [tempfile.TemporaryFile("w+") for _ in (0, 1)]  # noqa: SIM115
    for rank, log in zip((0, 1), logs):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2"}
        ranks.append(
            subprocess.Popen(
                [sys.executable, "-c", RANK, url, str(cache), str(mount)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        )
    taken = _fill(mount, cache, hold, ranks)
    results = []
    for process, log in zip(ranks, logs):
        out, _ = process.communicate(timeout=240)
        log.seek(0)
        err = log.read()
        sys.stderr.write(err)
        lines = out.strip().splitlines()
        failed = {"seen": [], "error": f"exit {process.returncode}: {err[-2000:]}"}
        results.append(json.loads(lines[-1]) if lines else failed)
    partial = sorted(str(p) for p in mount.rglob("*") if ".partial" in p.name)
    print(json.dumps({"ranks": results, "taken": taken, "partial": partial}))


if __name__ == "__main__":
    main()
