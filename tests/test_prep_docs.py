"""Every optimize / map / merge example of upstream's documentation, on local disk, streamed back.

Adapted only where the example needs the internet or a cloud (paths, a stand-in tokenizer).
"""

from __future__ import annotations

import json
import multiprocessing as mp
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import zstandard as zstd

import litdata as ld
from litdata import StreamingDataLoader, StreamingDataset, TokensLoader, merge_datasets, optimize
from litdata.processing.data_processor import ALL_DONE
from litdata.utilities.encryption import FernetEncryption
from litdata_format import load_index
from tests.support import prep_e2e_fns as fns

pytestmark = pytest.mark.slow


def test_quick_start_random_images(tmp_path: Path) -> None:
    out = str(tmp_path / "fast_data")
    ld.optimize(fn=fns.random_images, inputs=list(range(60)), output_dir=out, num_workers=2, chunk_bytes="64KB",
                keep_data_ordered=False, verbose=False)  # fmt: skip
    ds = StreamingDataset(out)
    assert len(ds) == 60
    sample = ds[5]
    assert 0 <= sample["index"] < 60 and tuple(sample["image"].shape) == (3, 32, 32)  # shared queue: any order
    assert sorted(int(i) for b in StreamingDataLoader(ds, batch_size=8, num_workers=2) for i in b["index"]) == list(
        range(60)
    )


def test_filter_with_yield(tmp_path: Path) -> None:
    out = str(tmp_path / "only_even_index_optimized")
    optimize(fn=fns.keep_even, inputs=list(range(1000)), output_dir=out, chunk_bytes="64MB", num_workers=1)
    assert list(StreamingDataset(out)) == list(range(0, 1000, 2))


def test_filter_with_try_except(tmp_path: Path) -> None:
    out = str(tmp_path / "only_defined_ratio_optimized")
    optimize(fn=fns.inverse, inputs=[0, 0, 0, 1, 2, 4, 0], output_dir=out, chunk_bytes="64MB", num_workers=1)
    assert list(StreamingDataset(out)) == [1.0, 0.5, 0.25]


def test_append_and_overwrite(tmp_path: Path) -> None:
    out = str(tmp_path / "my_optimized_dataset")
    optimize(fn=fns.compress, inputs=list(range(100)), output_dir=out, chunk_bytes="64MB", num_workers=2)
    optimize(fn=fns.compress, inputs=list(range(100, 200)), output_dir=out, chunk_bytes="64MB", mode="append",
             num_workers=2)  # fmt: skip
    ds = StreamingDataset(out)
    assert len(ds) == 200
    assert ds[:] == [(i, i**2) for i in range(200)]
    optimize(fn=fns.compress, inputs=list(range(10)), output_dir=out, chunk_bytes="64MB", mode="overwrite",
             num_workers=2)  # fmt: skip
    assert sorted(StreamingDataset(out)[:]) == [(i, i**2) for i in range(10)]


def test_queue_with_all_done(tmp_path: Path) -> None:
    q: mp.Queue = mp.Queue(maxsize=100)
    producer = mp.Process(target=fns.data_producer, args=(q, 300))
    producer.start()
    out = str(tmp_path / "fast_data")
    ld.optimize(fn=fns.fn, queue=q, output_dir=out, num_workers=2, chunk_size=100, mode="overwrite")
    producer.join()
    assert ALL_DONE == "ALL_DONE"
    assert sorted(StreamingDataset(out)) == [(i, i**2) for i in range(300)]


def test_tokenize_for_llm_pretraining(tmp_path: Path) -> None:
    raw = tmp_path / "slimpajama-raw"
    raw.mkdir()
    for part in range(3):
        with zstd.open(raw / f"part{part}.jsonl.zst", "wt", encoding="utf-8") as f:
            for row in range(20):
                name = "RedPajamaGithub" if row % 5 == 0 else "RedPajamaBook"
                f.write(json.dumps({"text": f"doc {part}-{row} " * 3, "meta": {"redpajama_set_name": name}}) + "\n")
    inputs = [str(p) for p in sorted(raw.rglob("*.zst"))]
    out = str(tmp_path / "slimpajama-optimized")
    optimize(fn=partial(fns.tokenize_fn, tokenizer=fns.Tokenizer()), inputs=inputs, output_dir=out,
             chunk_size=(65 * 8), item_loader=TokensLoader(), num_workers=2)  # fmt: skip
    expected = sum(len(fns.Tokenizer().encode(f"doc {p}-{r} " * 3)) for p in range(3) for r in range(20) if r % 5)
    block = 64 + 1
    dataset = StreamingDataset(input_dir=out, item_loader=TokensLoader(block_size=block), shuffle=True, drop_last=True)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2)
    batches = list(loader)
    assert all(tuple(b.shape) == (4, block) for b in batches)
    chunks = load_index(out).chunks
    assert sum(c.dim or 0 for c in chunks) == expected
    blocks = sum((c.dim or 0) // block for c in chunks)
    assert len(StreamingDataset(input_dir=out, item_loader=TokensLoader(block_size=block))) == blocks
    assert 0 < len(batches) * 4 <= blocks


def test_merge_datasets_example(tmp_path: Path) -> None:
    out_dirs = [str(tmp_path / f"fast_data_{i}") for i in range(1, 5)]
    for out_dir in out_dirs:
        optimize(fn=fns.random_images, inputs=list(range(25)), output_dir=out_dir, num_workers=2, chunk_bytes="64MB",
                 start_method="fork")  # fmt: skip
    merged_out_dir = str(tmp_path / "merged_fast_data")
    merge_datasets(input_dirs=out_dirs, output_dir=merged_out_dir)
    dataset = StreamingDataset(merged_out_dir)
    assert len(dataset) == 100


def test_compression_and_encryption(tmp_path: Path) -> None:
    out = str(tmp_path / "zstd")
    ld.optimize(fn=fns.compress, inputs=list(range(100)), output_dir=out, chunk_bytes="64MB", num_workers=1,
                compression="zstd")  # fmt: skip
    assert StreamingDataset(out)[:] == [(i, i**2) for i in range(100)]

    fernet = FernetEncryption(password="your_secure_password", level="sample")
    data_dir = str(tmp_path / "optimized_data")
    optimize(fn=fns.value_fn, inputs=list(range(5)), num_workers=1, output_dir=data_dir, chunk_bytes="64MB",
             encryption=fernet)  # fmt: skip
    fernet.save(str(tmp_path / "fernet.pem"))
    loaded = FernetEncryption.load(str(tmp_path / "fernet.pem"), password="your_secure_password")
    assert StreamingDataset(input_dir=data_dir, encryption=loaded)[:] == [{"index": i, "value": i**2} for i in range(5)]


def test_map_resize_images(tmp_path: Path) -> None:
    from PIL import Image

    input_dir = tmp_path / "my_large_images"
    input_dir.mkdir()
    for i in range(6):
        Image.fromarray(np.full((64, 48, 3), i * 20, dtype=np.uint8)).save(input_dir / f"{i}.png")
    inputs = [str(input_dir / f) for f in sorted(p.name for p in input_dir.iterdir())]
    out = tmp_path / "my_resized_images"
    ld.map(fn=fns.resize_image, inputs=inputs, output_dir=str(out), num_workers=2)
    assert sorted(p.name for p in out.iterdir()) == [f"{i}.png" for i in range(6)]
    with Image.open(out / "3.png") as resized:
        assert resized.size == (24, 24)
