"""Datasets made by this optimize (multi-worker, appended, compressed, tokens) are read by upstream litdata 0.2.76."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter, DatasetIndex, TokensLoader, load_index, merge_indexes
from litdata_format.internal import rank_index_name, write_json_atomic
from litdata_prep import merge_datasets, optimize
from litdata_stream import StreamingDataset
from tests.support import prep_e2e_fns as fns
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]

READ = """
import pickle, sys
from litdata import StreamingDataset
from litdata.streaming.item_loader import TokensLoader
kwargs = {"item_loader": TokensLoader(block_size=int(sys.argv[3]))} if len(sys.argv) > 3 else {}
ds = StreamingDataset(sys.argv[2], **kwargs)
out = []
for i in range(len(ds)):
    item = ds[i]
    out.append(item.tolist() if hasattr(item, "tolist") else item)
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""

IMAGES = """
import pickle, sys
from litdata import StreamingDataset
ds = StreamingDataset(sys.argv[2])
with open(sys.argv[1], "wb") as f:
    pickle.dump([(ds[i]["index"], tuple(ds[i]["image"].shape) if hasattr(ds[i]["image"], "shape")
                  else ds[i]["image"].size) for i in range(len(ds))], f)
"""


def test_upstream_reads_what_optimize_writes(tmp_path: Path) -> None:
    fork = {"start_method": "fork", "verbose": False}
    plain = tmp_path / "plain"
    optimize(fns.compress, list(range(50)), plain, chunk_size=7, num_workers=2, keep_data_ordered=True, **fork)
    optimize(fns.compress, list(range(50, 60)), plain, chunk_size=7, num_workers=2, mode="append",
             keep_data_ordered=True, **fork)  # fmt: skip
    assert run_upstream(READ, str(plain)) == [(i, i**2) for i in range(60)]

    zstd = tmp_path / "zstd"
    optimize(fns.value_fn, list(range(30)), zstd, chunk_bytes="1KB", compression="zstd", num_workers=2, **fork)
    ours = list(StreamingDataset(str(zstd)))
    assert run_upstream(READ, str(zstd)) == ours

    tokens = tmp_path / "tokens"
    optimize(fns.Tokenizer().encode, ["abcdefgh" * (i + 1) for i in range(12)], tokens, chunk_size=64,
             item_loader=TokensLoader(), num_workers=2, **fork)  # fmt: skip
    ours_tokens = [b.tolist() for b in StreamingDataset(str(tokens), item_loader=TokensLoader(block_size=8))]
    assert run_upstream(READ, str(tokens), "8") == ours_tokens

    images = tmp_path / "images"
    optimize(fns.random_images, list(range(10)), images, chunk_bytes="64KB", num_workers=2, **fork)
    got = run_upstream(IMAGES, str(images))
    assert sorted(i for i, _ in got) == list(range(10))
    assert all(shape in ((3, 32, 32), (32, 32)) for _, shape in got)


def test_upstream_reads_datasets_merged_across_chunk_sizes(tmp_path: Path) -> None:
    # Chunking is not part of a dataset's layout: upstream's reader ignores config.chunk_size/chunk_bytes.
    fork = {"start_method": "fork", "verbose": False}
    optimize(fns.compress, list(range(10)), tmp_path / "a", chunk_size=3, num_workers=1, **fork)
    optimize(fns.compress, list(range(10, 25)), tmp_path / "b", chunk_bytes="100B", num_workers=2, **fork)
    merge_datasets([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "merged"))
    assert sorted(run_upstream(READ, str(tmp_path / "merged"))) == [(i, i**2) for i in range(25)]


FIRST_AND_LAST = """
import pickle, sys
from litdata import StreamingDataset
ds = StreamingDataset(sys.argv[2])
out = [tuple(ds[0]["image"].shape)]
try:
    out.append(tuple(ds[len(ds) - 1]["image"].shape))
except Exception as err:
    out.append(type(err).__name__)
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


def test_upstream_cannot_read_pil_items_under_a_jpeg_config(tmp_path: Path) -> None:
    # Why pil and jpeg leaves are different layouts: an index that lists chunks of both under the first
    # one's config (what litdata's optimize merge once allowed) has items no reader decodes.
    import io

    import numpy as np
    from PIL import Image

    picture = Image.fromarray(np.full((8, 8, 3), 100, dtype=np.uint8), mode="RGB")
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG")
    parts = []
    for rank, image in enumerate([Image.open(buffer), picture]):
        writer = BinaryWriter(tmp_path, chunk_size=1, rank=rank)
        writer.write({"image": image})
        writer.done()
        parts.append(load_index(tmp_path / rank_index_name(rank)))
    assert [part.data_format for part in parts] == [["jpeg"], ["pil"]]
    with pytest.raises(ValueError, match="different sample layout"):
        merge_indexes(parts, "index.json")
    mixed = DatasetIndex(parts[0].chunks + parts[1].chunks, parts[0].config)
    write_json_atomic(tmp_path / "index.json", mixed.to_json())
    first, last = run_upstream(FIRST_AND_LAST, str(tmp_path))
    assert first == (3, 8, 8) and isinstance(last, str)  # the pil item fails to decode as a JPEG


# Token arrays of 1-999 tokens (~150k tokens in all), the same module for both libraries.
TOKEN_FN = """
import time
import numpy as np

def length(i):
    return 1 + (i * 7919) % 999

def tokens(i):
    time.sleep(0.001)  # every worker gets inputs of a shared queue
    return np.full(length(i), i, dtype=np.int32)
"""

UPSTREAM_BLOCKS = """
import json, pickle, sys
sys.path.insert(0, sys.argv[2])
from litdata import StreamingDataset, optimize
from litdata.streaming.item_loader import TokensLoader
import token_fn_52

cfg = json.loads(sys.argv[3])
out = {}
if __name__ == "__main__":
    for ordered in (False, True):
        for workers in cfg["workers"]:
            folder = f"{sys.argv[2]}/upstream-{workers}-{ordered}"
            optimize(token_fn_52.tokens, list(range(cfg["inputs"])), folder, chunk_size=cfg["chunk_size"],
                     item_loader=TokensLoader(), num_workers=workers, keep_data_ordered=ordered, start_method="fork")
            blocks = len(StreamingDataset(folder, item_loader=TokensLoader(block_size=cfg["block"])))
            out[workers, ordered] = len(json.load(open(f"{folder}/index.json"))["chunks"]), blocks
    with open(sys.argv[1], "wb") as f:
        pickle.dump(out, f)
"""


def test_token_blocks_are_upstreams_at_one_two_and_four_workers(tmp_path: Path) -> None:
    """Every chunk but one per worker is full, so TokensLoader drops no more tokens than upstream (issue 52)."""
    import importlib
    import sys

    (tmp_path / "token_fn_52.py").write_text(TOKEN_FN)
    sys.path.insert(0, str(tmp_path))
    try:
        token_fn: Any = importlib.import_module("token_fn_52")
    finally:
        sys.path.remove(str(tmp_path))
    cfg = {"inputs": 300, "chunk_size": 8 * 2049, "block": 2049, "workers": [1, 2, 4]}
    total = sum(token_fn.length(i) for i in range(cfg["inputs"]))
    full_chunks = total // cfg["chunk_size"]
    upstream = run_upstream(UPSTREAM_BLOCKS, str(tmp_path), json.dumps(cfg))
    for workers in cfg["workers"]:
        out = tmp_path / f"ours-{workers}"
        optimize(token_fn.tokens, list(range(cfg["inputs"])), out, chunk_size=cfg["chunk_size"],
                 item_loader=TokensLoader(), num_workers=workers, start_method="fork", verbose=False)  # fmt: skip
        chunks = load_index(out).chunks
        assert sum(c.dim or 0 for c in chunks) == total
        assert len(chunks) <= full_chunks + workers, f"{workers} workers: more than one partial chunk per worker"
        blocks = len(StreamingDataset(str(out), item_loader=TokensLoader(block_size=cfg["block"])))
        # Each chunk's tail shorter than a block is dropped (blocks never straddle chunks, as upstream's).
        assert total // cfg["block"] - len(chunks) < blocks <= total // cfg["block"]
        # Upstream's static slices (keep_data_ordered=True): the same chunks, so the same blocks.
        assert (len(chunks), blocks) == upstream[workers, True], f"{workers} workers"
        # Upstream's default (a shared queue, any order) also has one partial chunk per worker.
        assert blocks >= upstream[workers, False][1] - workers, f"{workers} workers"
