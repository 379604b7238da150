"""Every way litdata reads and writes a bucket, run in a fresh process whose environment holds one
credential source and no keys (``python -m tests.scripts.credential_source SPEC_JSON``).

The spec names the dataset URLs (and ``options``: storage options without credentials), a cache
folder, the credential server (to announce each phase, ``GET /mark/<source>/<phase>``) and the
phases to run. Each phase runs on its own; the last line of stdout is a JSON object
``{phase: {"samples": [...], "error": str | None, "seconds": float}}`` (phase ``epochs``: one list
of samples per epoch).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any

N = 24  # samples in the dataset, files in the raw folder
EPOCHS = 2
EPOCH_SAMPLE_SECONDS = 0.2  # 12 samples a worker: about 2.4 s of reading per worker and epoch, 4.8 s in all


def sample(i: int) -> dict[str, int]:
    """optimize's fn: one sample per input."""
    return {"index": i}


def number(data: bytes) -> int:
    """StreamingRawDataset's transform: the file's number."""
    return json.loads(data)["i"]


def slow_number(data: bytes) -> int:
    """A transform that takes a while, so an epoch outlives the credentials it started with."""
    time.sleep(0.35)
    return number(data)


def slow_sample(item: Any) -> Any:
    """StreamingDataset's transform for ``epochs``: each worker spends a while on its samples, so a
    worker's downloads spread over seconds, longer than the credentials it started with live."""
    time.sleep(EPOCH_SAMPLE_SECONDS)
    return item


def numbers(batch: list[int]) -> list[int]:
    return list(batch)


def _stream(spec: dict[str, Any], phase: str, workers: int, context: str | None) -> list[int]:
    from litdata_stream import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(spec["data"], cache_dir=f"{spec['cache']}/{phase}", storage_options=spec.get("options"))
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=workers, multiprocessing_context=context)
    return [int(i) for batch in loader for i in batch["index"]]


def _epochs(spec: dict[str, Any], phase: str) -> list[list[int]]:
    """Two epochs of one StreamingDataLoader with 2 persistent workers, reading every chunk from S3 each epoch.

    A cache cap smaller than a chunk makes each chunk leave the cache once read, so the second
    epoch downloads everything again; a pre-download of one chunk (no floor) spreads the downloads
    over the epoch; the workers persist, so each uses its credentials for both epochs.
    """
    from litdata_stream import StreamingDataLoader, StreamingDataset

    os.environ["LITDATA_ASYNC_MIN_PRE_DOWNLOAD"] = "0"  # before the workers start: they read it

    dataset = StreamingDataset(
        spec["data"],
        cache_dir=f"{spec['cache']}/{phase}",
        storage_options=spec.get("options"),
        max_cache_size=1,
        max_pre_download=1,
        transform=slow_sample,
    )
    loader = StreamingDataLoader(dataset, batch_size=2, num_workers=2, persistent_workers=True)
    return [[int(i) for batch in loader for i in batch["index"]] for _ in range(EPOCHS)]


def _optimize(spec: dict[str, Any], phase: str) -> list[int]:
    from litdata_prep import optimize
    from litdata_stream import StreamingDataset

    output = f"{spec['output']}/{phase}"
    optimize(fn=sample, inputs=list(range(N)), output_dir=output, chunk_size=4, num_workers=2, verbose=False)
    dataset = StreamingDataset(output, cache_dir=f"{spec['cache']}/{phase}-read")
    return [int(dataset[i]["index"]) for i in range(len(dataset))]


def _raw(spec: dict[str, Any], phase: str, transform: Any, prefetch: int = 16) -> list[int]:
    from torch.utils.data import DataLoader

    from litdata_raw import StreamingRawDataset

    dataset = StreamingRawDataset(
        spec["raw"],
        cache_dir=f"{spec['cache']}/{phase}",
        storage_options=spec.get("options"),
        transform=transform,
        max_prefetch=prefetch,
    )
    loader = DataLoader(dataset, batch_size=3, num_workers=2, collate_fn=numbers)
    return [i for batch in loader for i in batch]


def run(spec: dict[str, Any], phase: str) -> list[Any]:
    """Run one phase; the samples it saw, in order."""
    if phase == "epochs":
        return _epochs(spec, phase)
    if phase == "w0":
        return _stream(spec, phase, 0, None)
    if phase in ("fork", "spawn", "forkserver"):
        return _stream(spec, phase, 2, None if phase == "fork" else phase)  # fork: torch's default on Linux
    if phase == "optimize":
        return _optimize(spec, phase)
    if phase == "raw":
        return _raw(spec, phase, number)
    if phase == "raw-slow":
        return _raw(spec, phase, slow_number, prefetch=1)  # one download per item, spread over the epoch
    raise ValueError(f"unknown phase {phase!r}")


def main() -> None:
    spec = json.loads(sys.argv[1])
    results: dict[str, Any] = {}
    for phase in spec["phases"]:
        urllib.request.urlopen(f"{spec['marks']}/mark/{spec['source']}/{phase}", timeout=30).read()
        started = time.monotonic()
        try:
            results[phase] = {"samples": run(spec, phase), "error": None}
        except Exception:
            results[phase] = {"samples": [], "error": traceback.format_exc(limit=8)}
        results[phase]["seconds"] = round(time.monotonic() - started, 2)
    urllib.request.urlopen(f"{spec['marks']}/mark/idle", timeout=30).read()
    print(json.dumps(results))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
