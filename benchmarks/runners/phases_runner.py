"""One optimize run of ``benchmarks/optimize_phases.py``, timed by phase; ours, upstream, Mosaic or the floor.

Called as ``python phases_runner.py <lib> <workload> <params-json>`` by each library's venv python;
prints ``BENCH_RESULT {...}`` with the whole call's seconds and its three phases:

* start-up: from the call to the first sample ``fn`` made (workers started, inputs handed out);
* work: from the first sample to the last one;
* tail: from the last sample to the call's return (the last chunks, the index, joins).

The floor (lib ``floor``) is no library: the same ``fn`` over the same inputs in a fork pool of
as many processes as the workers, each sample made and dropped. No writer can return before its
``fn`` has made every sample, so its rate is the most any library could reach on the workload.

Every sample made stamps the time into a small file of its process (``mark``), at most every
2 ms after the first, so the last stamp is at most 2 ms before the true last sample and the
stamps cost nothing measurable. Standard library, numpy and PIL only: it runs in the peers' venvs.
"""

from __future__ import annotations

import os

if os.environ.get("BENCH_TORCH_FIRST"):
    # A data-prep script's first line (issue 46): torch is loaded before the library and the clock.
    import torch  # noqa: F401  # pyright: ignore[reportUnusedImport]

import json
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULT_PREFIX
from PIL import Image  # at the top, as a script making PIL samples imports it (Mosaic's import loads it too)

# The plugins Image.open loads on its first call (JPEG among them), loaded here for every library:
# Mosaic's import loads PIL's JPEG plugin before the clock, the floor's and ours' fn would load
# them in each worker inside it (~15 ms of CPU each).
Image.preinit()

VOCAB = 50257
_STAMP_EVERY_S = 0.002
_stamps = {"first": 0.0, "written": 0.0}


def mark() -> None:
    """Stamp "a sample was made now" into this process's file under ``BENCH_PHASES``."""
    now = time.time()
    if not _stamps["first"]:
        _stamps["first"] = now
    elif now - _stamps["written"] < _STAMP_EVERY_S:
        return
    _stamps["written"] = now
    fd = os.open(os.path.join(os.environ["BENCH_PHASES"], str(os.getpid())), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, f"{_stamps['first']:.6f} {now:.6f}\n".encode(), 0)
    finally:
        os.close(fd)


def _label(path: str) -> int:
    return int(Path(path).stem.rsplit("-", 1)[1]) % 1000


# -- the user functions (top level: spawned workers import them) --------------------------------
def image_bytes(path: str) -> dict[str, Any]:
    """The JPEG file's bytes as they are, and a label: pre-encoded bytes."""
    with open(path, "rb") as handle:
        data = handle.read()
    mark()
    return {"image": data, "label": _label(path)}


def image_pil(path: str) -> dict[str, Any]:
    """The JPEG opened with PIL (stored as the encoded file), and a label."""
    image = Image.open(path)
    mark()
    return {"image": image, "label": _label(path)}


def record(index: int) -> dict[str, Any]:
    """A small record: an int and an int32 array of 128."""
    sample = {"index": index, "tokens": (np.arange(128, dtype=np.int32) + index) % VOCAB}
    mark()
    return sample


class Tokenize:
    """The documents of one pre-tokenized ``.npy`` shard."""

    def __init__(self, doc_tokens: int) -> None:
        self.doc_tokens = doc_tokens

    def __call__(self, path: str) -> Iterator[np.ndarray]:
        tokens = np.load(path)
        for start in range(0, len(tokens), self.doc_tokens):
            mark()
            yield tokens[start : start + self.doc_tokens]


# The fn of each workload but tokens (a generator per shard, Tokenize).
FNS = {"bytes": image_bytes, "pil": image_pil, "records": record}


def _parts(inputs: list[Any], workers: int) -> list[list[Any]]:
    """``inputs`` cut into ``workers`` contiguous parts, as a fork pool of that many gets them."""
    size = -(-len(inputs) // workers)
    return [inputs[rank * size : (rank + 1) * size] for rank in range(workers)]


# -- LitData (ours and upstream: the same user code) --------------------------------------------
def _litdata(workload: str, inputs: list[Any], params: dict[str, Any]) -> None:
    import litdata

    common = {"inputs": inputs, "output_dir": params["out_dir"], "num_workers": params["workers"]}
    if workload == "tokens":
        litdata.optimize(
            fn=Tokenize(params["doc_tokens"]),
            chunk_size=params["chunk_tokens"],
            item_loader=litdata.TokensLoader(),
            **common,
        )
        return
    litdata.optimize(fn=FNS[workload], chunk_bytes=params["chunk_bytes"], **common)


# -- MosaicML Streaming: one MDSWriter per forked process, then merge_index ---------------------
_MDS_COLUMNS = {
    "bytes": {"image": "bytes", "label": "int"},
    "pil": {"image": "jpeg", "label": "int"},
    "records": {"index": "int", "tokens": "ndarray:int32:128"},
}


def _mds_part(args: tuple[str, int, list[Any], dict[str, Any]]) -> None:
    from streaming import MDSWriter  # pyright: ignore[reportMissingImports]

    workload, rank, inputs, params = args
    out = os.path.join(params["out_dir"], str(rank))
    if workload == "tokens":
        block = params["block"]
        columns = {"tokens": f"ndarray:int32:{block}"}
        tokenize = Tokenize(params["doc_tokens"])
        with MDSWriter(out=out, columns=columns, size_limit=params["chunk_bytes"]) as writer:
            pending = np.empty(0, dtype=np.int32)
            for path in inputs:
                for doc in tokenize(path):
                    pending = np.concatenate([pending, doc])
                    while len(pending) >= block:
                        writer.write({"tokens": pending[:block]})
                        pending = pending[block:]
        return
    make = FNS[workload]
    with MDSWriter(out=out, columns=_MDS_COLUMNS[workload], size_limit=params["chunk_bytes"]) as writer:
        for item in inputs:
            writer.write(make(item))


def _mosaic(workload: str, inputs: list[Any], params: dict[str, Any]) -> None:
    from streaming.base.util import merge_index  # pyright: ignore[reportMissingImports]

    workers = params["workers"]
    jobs = [(workload, rank, part, params) for rank, part in enumerate(_parts(inputs, workers))]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_mds_part, jobs)
    merge_index(params["out_dir"], keep_local=True)


def _held(value: Any) -> int:
    """The bytes a writer writes for one leaf: an opened JPEG's are its file's."""
    path = getattr(value, "filename", "") if isinstance(value, Image.Image) else ""  # an ImageFile's
    if path:
        return os.path.getsize(path)
    return len(value) if isinstance(value, bytes) else getattr(value, "nbytes", 8)


def _made(args: tuple[str, list[Any], dict[str, Any]]) -> int:
    """Make every sample of ``inputs`` with the workload's ``fn`` and drop it; the bytes they held."""
    workload, inputs, params = args
    if workload == "tokens":
        tokenize = Tokenize(params["doc_tokens"])
        return sum(doc.nbytes for path in inputs for doc in tokenize(path))
    make = FNS[workload]
    made = 0
    for item in inputs:
        sample = make(item)
        made += sum(_held(v) for v in sample.values())
    return made


def _floor(workload: str, inputs: list[Any], params: dict[str, Any]) -> int:
    workers = params["workers"]
    jobs = [(workload, part, params) for part in _parts(inputs, workers)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return sum(pool.map(_made, jobs))


def _inputs(workload: str, params: dict[str, Any]) -> list[Any]:
    if workload == "records":
        return list(range(params["records"]))
    folder, pattern = (params["tokens_dir"], "*.npy") if workload == "tokens" else (params["images_dir"], "*.jpg")
    found = sorted(str(p) for p in Path(folder).glob(pattern))
    # A scale above 1x uses the inputs again, in the same order (the page cache holds them either way).
    return (found * -(-params["files"] // len(found)))[: params["files"]]


def run(lib: str, workload: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run one optimize and return its seconds by phase."""
    stamps = Path(params["phases_dir"])
    stamps.mkdir(parents=True, exist_ok=True)
    os.environ["BENCH_PHASES"] = str(stamps)  # the workers inherit it
    inputs = _inputs(workload, params)
    # What a script imports at its top is imported before the clock starts: the phases are the
    # call's own (upstream's and Mosaic's imports load torch, which is seconds on this disk).
    if lib == "mosaic":
        from streaming import MDSWriter  # noqa: F401  # pyright: ignore[reportMissingImports]
    elif lib != "floor":
        from litdata import TokensLoader, optimize  # noqa: F401
    made = 0
    started = time.time()
    if lib == "mosaic":
        _mosaic(workload, inputs, params)
    elif lib == "floor":
        made = _floor(workload, inputs, params)
    else:
        _litdata(workload, inputs, params)
    ended = time.time()
    marks = [tuple(map(float, p.read_text().split())) for p in stamps.iterdir()]
    first, last = min(m[0] for m in marks), max(m[1] for m in marks)
    files = [p for p in Path(params["out_dir"]).rglob("*") if p.is_file()] if not made else []
    # The floor writes nothing: its "bytes" are those its samples held, about what a writer writes.
    written = made or sum(p.stat().st_size for p in files)
    result = {
        "elapsed_s": ended - started,
        "startup_s": first - started,
        "work_s": last - first,
        "tail_s": ended - last,
        "bytes": written,
        "inputs": len(inputs),
    }
    # The tail, split by the files' change times (a rename sets it: a file is stamped as it is published,
    # to the kernel's tick, 4 ms here): the last chunk written and published (work in proportion to what
    # the workers held at their last sample), then the index (the workers' reports, the index merged and
    # written), then the call's return (clean-up, joins).
    indexes = [p.stat().st_ctime for p in files if p.name == "index.json"]
    chunks = [p.stat().st_ctime for p in files if p.name != "index.json" and not p.name.endswith(".json")]
    if indexes and chunks:
        chunk_end = max(last, *chunks)
        index_end = max(chunk_end, *indexes)
        result.update(
            last_chunk_s=chunk_end - last, to_index_s=index_end - chunk_end, to_return_s=max(0.0, ended - index_end)
        )
    return result


if __name__ == "__main__":
    lib_name, workload_name, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    result = run(lib_name, workload_name, json.loads(raw))
    print(RESULT_PREFIX + json.dumps(result), flush=True)
