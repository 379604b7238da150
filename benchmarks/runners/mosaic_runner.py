"""The MosaicML Streaming side of the workloads, written the way its docs show.

Writing with 2 workers follows Mosaic's "parallel dataset conversion" recipe: one ``MDSWriter`` per
process into its own sub-folder, then ``merge_index``. Token streams are packed by the user code
into fixed 2049-token samples (Mosaic has no TokensLoader). Raw files have no Mosaic equivalent.
"""

from __future__ import annotations

import os

if os.environ.get("BENCH_TORCH_FIRST"):
    # A data-prep script's first line (issue 46): torch is loaded before the library and the clock.
    import torch  # noqa: F401  # pyright: ignore[reportUnusedImport]

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import main, read_epochs

VOCAB = 50257
RECORD_COLUMNS = {"index": "int", "tokens": "ndarray:int32:128"}
IMAGE_COLUMNS = {"image": "jpeg", "label": "int"}
BYTES_COLUMNS = {"image": "bytes", "label": "int"}


def _clean_shared_memory() -> None:
    from streaming.base.util import clean_stale_shared_memory  # pyright: ignore[reportMissingImports]

    clean_stale_shared_memory()


def _write_part(args: tuple[str, int, list[Any], dict[str, Any]]) -> int:
    kind, rank, inputs, params = args
    from PIL import Image
    from streaming import MDSWriter  # pyright: ignore[reportMissingImports]

    out = os.path.join(params["out_dir"], str(rank))
    if kind == "records":
        with MDSWriter(out=out, columns=RECORD_COLUMNS, size_limit=params["chunk_bytes"]) as writer:
            for index in inputs:
                writer.write({"index": index, "tokens": (np.arange(128, dtype=np.int32) + index) % VOCAB})
    elif kind == "images":
        with MDSWriter(out=out, columns=IMAGE_COLUMNS, size_limit=params["chunk_bytes"]) as writer:
            for path in inputs:
                label = int(Path(path).stem.rsplit("-", 1)[1]) % 1000
                writer.write({"image": Image.open(path), "label": label})
    elif kind == "bytes":
        with MDSWriter(out=out, columns=BYTES_COLUMNS, size_limit=params["chunk_bytes"]) as writer:
            for path in inputs:
                with open(path, "rb") as handle:
                    data = handle.read()
                writer.write({"image": data, "label": int(Path(path).stem.rsplit("-", 1)[1]) % 1000})
    else:
        block = params["block"]
        columns = {"tokens": f"ndarray:int32:{block}"}
        with MDSWriter(out=out, columns=columns, size_limit=params["chunk_bytes"]) as writer:
            pending = np.empty(0, dtype=np.int32)
            for path in inputs:
                tokens = np.load(path)
                for start in range(0, len(tokens), params["doc_tokens"]):
                    pending = np.concatenate([pending, tokens[start : start + params["doc_tokens"]]])
                    while len(pending) >= block:
                        writer.write({"tokens": pending[:block]})
                        pending = pending[block:]
    return rank


def _optimize(kind: str, inputs: list[Any], params: dict[str, Any]) -> dict[str, Any]:
    from streaming.base.util import merge_index  # pyright: ignore[reportMissingImports]

    workers = params["workers"]
    started = time.perf_counter()
    size = -(-len(inputs) // workers)
    jobs = [(kind, rank, inputs[rank * size : (rank + 1) * size], params) for rank in range(workers)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_write_part, jobs)
    merge_index(params["out_dir"], keep_local=True)
    return {"elapsed_s": time.perf_counter() - started, "impl": "MDSWriter per process + merge_index"}


def optimize_records(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    result = _optimize("records", list(range(params["n"])), params)
    result["items"] = params["n"]
    return result


def optimize_images(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    paths = sorted(str(p) for p in Path(params["images_dir"]).glob("*.jpg"))
    result = _optimize("images", paths, params)
    result["items"] = len(paths)
    return result


def optimize_bytes(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    paths = sorted(str(p) for p in Path(params["images_dir"]).glob("*.jpg"))
    result = _optimize("bytes", paths, params)
    result["items"] = len(paths)
    return result


def tokens_optimize(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    paths = sorted(str(p) for p in Path(params["tokens_dir"]).glob("*.npy"))
    result = _optimize("tokens", paths, params)
    result["items"] = params["total_tokens"]
    return result


def _image_dataset(**kwargs: Any) -> Any:
    """A ``StreamingDataset`` whose samples are decoded to tensors, the way Mosaic's docs show a
    transform: a subclass overriding ``__getitem__``."""
    import torch
    from streaming import StreamingDataset  # pyright: ignore[reportMissingImports]

    class ImageDataset(StreamingDataset):
        def __getitem__(self, index: int) -> dict[str, Any]:
            sample = super().__getitem__(index)
            image = torch.from_numpy(np.asarray(sample["image"].convert("RGB"))).permute(2, 0, 1)
            return {"image": image, "label": sample["label"]}

    return ImageDataset(**kwargs)


def stream(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    _clean_shared_memory()
    from streaming import StreamingDataLoader, StreamingDataset  # pyright: ignore[reportMissingImports]

    s3 = params.get("s3")
    cache_dir = params.get("cache_dir")
    client = ""
    if s3:
        from importlib.metadata import version

        # Mosaic's S3 downloader is boto3, configured from the environment.
        os.environ.update(
            S3_ENDPOINT_URL=s3["endpoint"],
            AWS_ACCESS_KEY_ID=s3["key"],
            AWS_SECRET_ACCESS_KEY=s3["secret"],
            AWS_DEFAULT_REGION=s3["region"],
        )
        client = f"boto3 {version('boto3')}"
    started = time.perf_counter()
    kwargs: dict[str, Any] = {"shuffle": True, "batch_size": params["batch_size"]}
    if s3:
        kwargs.update(remote=s3["url"], local=cache_dir)
    else:
        kwargs.update(local=params["input"])
    if params.get("max_cache_bytes"):
        kwargs["cache_limit"] = params["max_cache_bytes"]
    dataset = _image_dataset(**kwargs) if params.get("images") else StreamingDataset(**kwargs)
    loader = StreamingDataLoader(dataset, batch_size=params["batch_size"], num_workers=params["num_workers"])
    result = read_epochs(loader, params, started)
    del loader
    if s3:
        result["s3_client"] = client
    return result


def tokens_stream(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    _clean_shared_memory()
    from streaming import StreamingDataLoader, StreamingDataset  # pyright: ignore[reportMissingImports]

    started = time.perf_counter()
    dataset = StreamingDataset(local=params["input"], shuffle=True, batch_size=params["batch_size"])
    loader = StreamingDataLoader(dataset, batch_size=params["batch_size"], num_workers=params["num_workers"])
    blocks, checksum = 0, 0
    for batch in loader:
        tokens = batch["tokens"]
        blocks += tokens.shape[0]
        checksum += int(tokens[:, 0].sum())
    elapsed = time.perf_counter() - started
    del loader
    return {"items": blocks * params["block"], "elapsed_s": elapsed, "blocks": blocks}


def random_access(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    _clean_shared_memory()
    from streaming import StreamingDataset  # pyright: ignore[reportMissingImports]

    started = time.perf_counter()
    dataset = StreamingDataset(local=params["input"])
    opened = time.perf_counter() - started
    picks = np.random.default_rng(params["seed"]).integers(0, len(dataset), params["n"]).tolist()
    checksum = 0
    started = time.perf_counter()
    for i in picks:
        checksum += int(dataset[i]["index"])
    elapsed = time.perf_counter() - started
    return {"items": len(picks), "elapsed_s": elapsed, "open_s": opened, "checksum": checksum}


WORKLOADS = {
    "optimize-records": optimize_records,
    "optimize-images": optimize_images,
    "optimize-bytes": optimize_bytes,
    "tokens-optimize": tokens_optimize,
    "stream": stream,
    "tokens-stream": tokens_stream,
    "random-access": random_access,
}

if __name__ == "__main__":
    main(WORKLOADS)
