"""A traced run reads exactly as an untraced one (issue 28): the same batches, gathered the same way.

Tracing at the ``sample`` level used to switch gathering off (the samples were then read one by
one so that each could be a span): a traced run did not run the code it traced. Now every site
makes one probe call that only observes, and a gathered batch records one ``sample`` span per
run of samples of one chunk (``samples`` = how many).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from litdata_format import BinaryWriter
from litdata_io import enable_tracer
from litdata_stream import StreamingDataLoader, StreamingDataset

_VARS = ("LITDATA_LOG_FILE", "LITDATA_TRACE_LEVEL", "LITDATA_TRACE_CATEGORIES")


@pytest.fixture(autouse=True)
def _tracer_off() -> Iterator[None]:
    for var in _VARS:
        os.environ.pop(var, None)
    enable_tracer("off")
    yield
    enable_tracer("off")
    for var in _VARS:
        os.environ.pop(var, None)


def _dataset(path: Path, samples: int) -> Path:
    writer = BinaryWriter(path, chunk_size=4)
    for i in range(samples):
        writer.add_item(i, {"i": i, "x": np.full(4, i, dtype=np.int32)})
    writer.done()
    writer.merge()
    return path


def _epoch(root: Path, workers: int) -> list[dict[str, torch.Tensor]]:
    loader = StreamingDataLoader(StreamingDataset(str(root), shuffle=True, seed=3), batch_size=8, num_workers=workers)
    return list(loader)


def _events(log: Path) -> list[dict[str, str]]:
    found = []
    for line in log.read_text().splitlines():
        pairs = (part.partition(":") for part in line.rstrip(";").split(";"))
        found.append({key.strip(): value.strip() for key, _, value in pairs})
    return found


@pytest.mark.parametrize("workers", [0, 2])
def test_a_traced_run_gathers_the_same_batches(tmp_path: Path, workers: int) -> None:
    root = _dataset(tmp_path / "ds", 40)  # 10 chunks of 4
    untraced = _epoch(root, workers)
    log = tmp_path / "trace.log"
    enable_tracer("sample", log_file=log)
    traced = _epoch(root, workers)
    enable_tracer("off")

    assert len(traced) == len(untraced) == 5
    for a, b in zip(untraced, traced):
        assert a.keys() == b.keys()
        assert all(torch.equal(a[key], b[key]) and a[key].dtype == b[key].dtype for key in a)
    assert sorted(int(i) for batch in traced for i in batch["i"]) == list(range(40))

    events = _events(log)
    samples = [e for e in events if e.get("name") == "sample"]
    # Gathered: one span per run of samples of one chunk, never one per sample.
    assert samples and all("samples" in e and "index" not in e for e in samples), samples[:3]
    assert sum(int(e["samples"]) for e in samples) == 40
    reads = [e for e in events if e.get("name") == "read"]
    assert sorted(e["chunk"] for e in reads if e["ph"] == "B") == sorted(str(c) for c in range(10))
    assert sum(1 for e in reads if e["ph"] == "E") == 10
    made = [e for e in events if e.get("name") == "worker_batch"]
    assert len(made) == 5  # every batch a worker (or the main process) made, once


def test_samples_read_one_by_one_are_traced_one_by_one(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds", 12)
    log = tmp_path / "trace.log"
    enable_tracer("sample", log_file=log)
    seen: list[Any] = [int(sample["i"]) for sample in StreamingDataset(str(root))]
    enable_tracer("off")
    assert seen == list(range(12))
    spans = [e for e in _events(log) if e.get("name") == "sample"]
    assert sorted(int(e["index"]) for e in spans) == list(range(12))
