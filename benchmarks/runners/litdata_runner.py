"""The LitData side of every workload, for ours AND upstream: the same user code, run by each venv's python.

``import litdata`` resolves to this project in the workspace venv and to the real LitData 0.2.76 in
the peer's venv; the code below is what a user of either writes, which is the point of a drop-in.
Where ours lacks a piece (``optimize`` before litdata-prep lands, ``StreamingRawDataset``), the gap is
reported, or for optimize a clearly labelled stand-in (``BinaryWriter`` in a 2-process pool) runs.
"""

from __future__ import annotations

import os

if os.environ.get("BENCH_TORCH_FIRST"):
    # A data-prep script's first line (issue 46): torch is loaded before the library and the clock.
    import torch  # noqa: F401  # pyright: ignore[reportUnusedImport]

import multiprocessing
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _common import main, read_epochs

VOCAB = 50257


# -- the user functions given to optimize (top level, so worker processes can find them) -------
def make_record(index: int) -> dict[str, Any]:
    """One sample of optimize-records: ``{"index": int, "tokens": int32[128]}``."""
    return {"index": index, "tokens": (np.arange(128, dtype=np.int32) + index) % VOCAB}


def make_image_sample(path: str) -> dict[str, Any]:
    """One sample of optimize-images: the JPEG file as it is (PIL opens lazily) and a label."""
    from PIL import Image

    return {"image": Image.open(path), "label": int(Path(path).stem.rsplit("-", 1)[1]) % 1000}


def make_bytes_sample(path: str) -> dict[str, Any]:
    """One sample of optimize-bytes: the JPEG file's bytes as they are (pre-encoded) and a label."""
    with open(path, "rb") as handle:
        data = handle.read()
    return {"image": data, "label": int(Path(path).stem.rsplit("-", 1)[1]) % 1000}


_MAKERS = {"records": make_record, "images": make_image_sample, "bytes": make_bytes_sample}


def tokenize(path: str, doc_tokens: int) -> Iterator[np.ndarray]:
    """A "tokenizer": the documents of one pre-tokenized ``.npy`` shard."""
    tokens = np.load(path)
    for start in range(0, len(tokens), doc_tokens):
        yield tokens[start : start + doc_tokens]


class _Tokenize:
    def __init__(self, doc_tokens: int) -> None:
        self.doc_tokens = doc_tokens

    def __call__(self, path: str) -> Iterator[np.ndarray]:
        yield from tokenize(path, self.doc_tokens)


# -- optimize ------------------------------------------------------------------------------------
def _optimize_fn() -> Any:
    import litdata

    try:
        return litdata.optimize
    except AttributeError:
        return None


def _standin_worker(args: tuple[str, int, list[Any], dict[str, Any]]) -> int:
    """Stand-in for ours until ``litdata.optimize`` exists: one BinaryWriter per worker process."""
    kind, rank, inputs, params = args
    from litdata_format import BinaryWriter, TokensLoader

    if kind == "tokens":
        writer = BinaryWriter(
            params["out_dir"], chunk_size=params["chunk_tokens"], item_loader=TokensLoader(), rank=rank
        )
        index = 0
        for path in inputs:
            for doc in tokenize(path, params["doc_tokens"]):
                writer.add_item(index, doc)
                index += 1
    else:
        writer = BinaryWriter(params["out_dir"], chunk_bytes=params["chunk_bytes"], rank=rank)
        fn = _MAKERS[kind]
        for index, item in enumerate(inputs):
            writer.add_item(index, fn(item))
    writer.done()
    return rank


def _standin_optimize(kind: str, inputs: list[Any], params: dict[str, Any]) -> None:
    from litdata_format import complete_dataset

    workers = params["workers"]
    Path(params["out_dir"]).mkdir(parents=True, exist_ok=True)
    size = -(-len(inputs) // workers)
    jobs = [(kind, rank, inputs[rank * size : (rank + 1) * size], params) for rank in range(workers)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_standin_worker, jobs)
    complete_dataset(params["out_dir"])


def _optimize(lib: str, kind: str, inputs: list[Any], params: dict[str, Any]) -> dict[str, Any]:
    optimize = _optimize_fn()
    impl = "litdata.optimize"
    started = time.perf_counter()
    if optimize is None:
        if lib != "ours":
            raise RuntimeError(f"{lib}: litdata.optimize is missing")
        impl = "stand-in: litdata_format.BinaryWriter in a 2-process pool (litdata.optimize not available yet)"
        _standin_optimize(kind, inputs, params)
    elif kind == "tokens":
        from litdata import TokensLoader

        optimize(
            fn=_Tokenize(params["doc_tokens"]),
            inputs=inputs,
            output_dir=params["out_dir"],
            chunk_size=params["chunk_tokens"],
            item_loader=TokensLoader(),
            num_workers=params["workers"],
        )
    else:
        method = {"start_method": params["start_method"]} if params.get("start_method") else {}
        optimize(
            fn=_MAKERS[kind],
            inputs=inputs,
            output_dir=params["out_dir"],
            chunk_bytes=params["chunk_bytes"],
            num_workers=params["workers"],
            **method,
        )
    elapsed = time.perf_counter() - started
    return {"elapsed_s": elapsed, "impl": impl, "torch_first": bool(os.environ.get("BENCH_TORCH_FIRST"))}


def optimize_records(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    result = _optimize(lib, "records", list(range(params["n"])), params)
    result["items"] = params["n"]
    return result


def optimize_images(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    paths = sorted(str(p) for p in Path(params["images_dir"]).glob("*.jpg"))
    result = _optimize(lib, "images", paths, params)
    result["items"] = len(paths)
    return result


def optimize_bytes(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    paths = sorted(str(p) for p in Path(params["images_dir"]).glob("*.jpg"))
    result = _optimize(lib, "bytes", paths, params)
    result["items"] = len(paths)
    return result


def tokens_optimize(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    paths = sorted(str(p) for p in Path(params["tokens_dir"]).glob("*.npy"))
    result = _optimize(lib, "tokens", paths, params)
    result["items"] = params["total_tokens"]
    return result


# -- streaming -----------------------------------------------------------------------------------
def _s3_setup(lib: str, params: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    s3 = params.get("s3")
    if not s3:
        return None, ""
    options = {
        "endpoint_url": s3["endpoint"],
        "aws_access_key_id": s3["key"],
        "aws_secret_access_key": s3["secret"],
        "region_name": s3["region"],
    }
    from importlib.metadata import version

    if lib == "upstream":
        # Workaround (recorded in the report): upstream 0.2.76 builds its obstore client without
        # allow_http, so a plain-http endpoint fails with "BadScheme". Set the option it passes.
        import importlib

        downloader = importlib.import_module("litdata.streaming.downloader")  # upstream's module
        downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True
        client = (
            f"obstore {version('obstore')} for chunks (allow_http set in-process), "
            f"boto3 {version('boto3')} for index.json"
        )
    else:
        client = ""  # named after the run (opening a store here would start obstore before the fork)
    return options, client


def _our_s3_client(url: str, options: dict[str, Any]) -> str:
    from importlib.metadata import version

    from litdata_io import get_storage

    return f"{type(get_storage(url, options)).__name__} (obstore {version('obstore')})"


def image_to_tensor(sample: dict[str, Any]) -> dict[str, Any]:
    """The transform of the image rows: the JPEG decoded to a ``uint8[3, H, W]`` tensor."""
    import torch

    image = sample["image"]
    if not isinstance(image, torch.Tensor):  # a PIL image (decoded lazily): decode it now
        image = torch.from_numpy(np.asarray(image.convert("RGB"))).permute(2, 0, 1)
    return {"image": image, "label": sample["label"]}


def stream(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    from litdata import StreamingDataLoader, StreamingDataset

    options, client = _s3_setup(lib, params)
    cache_dir = params.get("cache_dir")
    started = time.perf_counter()
    kwargs: dict[str, Any] = {"shuffle": True}
    if options is not None:
        kwargs.update(storage_options=options, cache_dir=cache_dir)
    if params.get("max_cache_bytes"):
        kwargs["max_cache_size"] = params["max_cache_bytes"]
    if params.get("images"):
        kwargs["transform"] = image_to_tensor
    dataset: Any = StreamingDataset(params["input"], **kwargs)
    copies = params.get("copies", 1)
    if copies > 1:  # stream-combined: the dataset mixed with copies of itself, every sample once
        from litdata import CombinedStreamingDataset

        dataset = CombinedStreamingDataset(
            [dataset, *(StreamingDataset(params["input"], **kwargs) for _ in range(copies - 1))], seed=42
        )
    loader = StreamingDataLoader(dataset, batch_size=params["batch_size"], num_workers=params["num_workers"])
    result = read_epochs(loader, params, started)
    del loader  # shuts the workers down
    if options is not None:
        result["s3_client"] = client or _our_s3_client(params["s3"]["url"], options)
    return result


def tokens_stream(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    from litdata import StreamingDataLoader, StreamingDataset, TokensLoader

    started = time.perf_counter()
    dataset = StreamingDataset(params["input"], item_loader=TokensLoader(block_size=params["block"]), shuffle=True)
    loader = StreamingDataLoader(dataset, batch_size=params["batch_size"], num_workers=params["num_workers"])
    blocks, checksum = 0, 0
    for batch in loader:
        blocks += batch.shape[0]
        checksum += int(batch[:, 0].sum())
    elapsed = time.perf_counter() - started
    del loader
    return {"items": blocks * params["block"], "elapsed_s": elapsed, "blocks": blocks}


def random_access(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    from litdata import StreamingDataset

    started = time.perf_counter()
    dataset = StreamingDataset(params["input"])
    opened = time.perf_counter() - started
    picks = np.random.default_rng(params["seed"]).integers(0, len(dataset), params["n"]).tolist()
    checksum = 0
    started = time.perf_counter()
    for i in picks:
        checksum += int(dataset[i]["index"])
    elapsed = time.perf_counter() - started
    return {"items": len(picks), "elapsed_s": elapsed, "open_s": opened, "checksum": checksum}


def raw_files(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    import litdata

    try:
        raw_dataset = litdata.StreamingRawDataset
    except AttributeError:
        return {"ok": False, "status": "not available yet"}
    from torch.utils.data import DataLoader

    started = time.perf_counter()
    dataset = raw_dataset(params["input"], cache_dir=params["cache_dir"])
    loader = DataLoader(dataset, batch_size=params["batch_size"], num_workers=params["num_workers"])
    files, size = 0, 0
    for batch in loader:
        files += len(batch)
        size += sum(len(item) for item in batch)
    elapsed = time.perf_counter() - started
    del loader
    return {"items": files, "elapsed_s": elapsed, "bytes": size, "complete": files == params["expected"]}


def scale(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    """Issue 29: per dataset size, the open time and one shuffled epoch's CPU per chunk (num_workers=0)."""
    from litdata import StreamingDataLoader, StreamingDataset

    per_chunk = params["samples_per_chunk"]
    result: dict[str, Any] = {"open_s": {}, "open_cpu_s": {}, "us_per_chunk": {}, "epoch_s": {}}
    chunks_read, cpu_total, wall_total = 0, 0.0, 0.0
    for size, folder in params["folders"].items():
        chunks = int(size)
        started, cpu = time.perf_counter(), time.process_time()
        dataset = StreamingDataset(folder, shuffle=True)
        count = len(dataset)
        result["open_s"][size] = time.perf_counter() - started
        result["open_cpu_s"][size] = time.process_time() - cpu
        if count != chunks * per_chunk:
            return {"ok": False, "status": f"len() is {count}, expected {chunks * per_chunk}"}
        loader = StreamingDataLoader(dataset, batch_size=params["batch_size"], num_workers=0)
        seen, total = 0, 0
        started, cpu = time.perf_counter(), time.process_time()
        for batch in loader:
            values = batch["i"]
            seen += len(values)
            total += int(values.sum())
        spent, wall = time.process_time() - cpu, time.perf_counter() - started
        samples = chunks * per_chunk
        if seen != samples or total != samples * (samples - 1) // 2:
            return {"ok": False, "status": f"{size} chunks: the epoch gave {seen} samples, not each of {samples} once"}
        result["us_per_chunk"][size] = spent / chunks * 1e6
        result["epoch_s"][size] = wall
        chunks_read += chunks
        cpu_total += spent
        wall_total += wall
    # The report's rate is items / elapsed_s: chunks per CPU-second of the epochs (the machine is shared).
    return {**result, "items": chunks_read, "elapsed_s": cpu_total, "wall_s": wall_total}


WORKLOADS = {
    "optimize-records": optimize_records,
    "optimize-images": optimize_images,
    "optimize-bytes": optimize_bytes,
    "tokens-optimize": tokens_optimize,
    "stream": stream,
    "stream-combined": stream,
    "tokens-stream": tokens_stream,
    "random-access": random_access,
    "raw-files": raw_files,
    "scale": scale,
}

if __name__ == "__main__":
    main(WORKLOADS)
