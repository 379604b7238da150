"""Property: an interrupted and resumed run yields what an uninterrupted run yields.

Random dataset shapes, batch sizes, worker counts (0-2), shuffle off / full / window, drop_last,
the epoch and the batch at which the run is interrupted. Resumed with the same number of
workers, the order is identical; with another number, the samples are the same multiset (under
``drop_last`` minus at most a batch per worker of the new split, never a duplicate).
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resume_property")


def _dataset_dir(root: Path, n: int, chunk_size: int) -> Path:
    path = root / f"n{n}_c{chunk_size}"
    if not (path / "index.json").exists():
        writer = BinaryWriter(path, chunk_size=chunk_size)
        for i in range(n):
            writer.add_item(i, {"index": i})
        writer.done()
        writer.merge()
    return path


@contextlib.contextmanager
def _shuffle_env(mode: str) -> Iterator[None]:
    """The window shuffle is chosen when a dataset is built; set its variables around that."""
    saved = {k: os.environ.get(k) for k in ("LITDATA_POSIX_FAST", "LITDATA_POSIX_SHUFFLE_WINDOW")}
    if mode.startswith("window"):
        os.environ["LITDATA_POSIX_FAST"] = "1"
        os.environ["LITDATA_POSIX_SHUFFLE_WINDOW"] = mode.split(":")[1]
    else:
        os.environ.pop("LITDATA_POSIX_FAST", None)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _epoch(batches: Any) -> list[int]:
    return [int(i) for batch in batches for i in batch["index"]]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(
    n=st.integers(1, 90),
    chunk_size=st.integers(1, 17),
    batch_size=st.integers(1, 7),
    workers=st.integers(0, 2),
    resume_workers=st.integers(0, 2),
    mode=st.sampled_from(["none", "full", "window:1", "window:3"]),
    drop_last=st.booleans(),
    epoch=st.integers(1, 2),
    stop_fraction=st.floats(0, 1),
)
def test_interrupted_and_resumed_equals_uninterrupted(
    data_root: Path,
    n: int,
    chunk_size: int,
    batch_size: int,
    workers: int,
    resume_workers: int,
    mode: str,
    drop_last: bool,
    epoch: int,
    stop_fraction: float,
) -> None:
    path = _dataset_dir(data_root, n, chunk_size)

    def loader(num_workers: int) -> StreamingDataLoader:
        with _shuffle_env(mode):
            ds = StreamingDataset(path, shuffle=mode != "none", drop_last=drop_last, seed=n)
        return StreamingDataLoader(ds, batch_size=batch_size, num_workers=num_workers)

    reference = loader(workers)
    epochs = [_epoch(reference) for _ in range(epoch + 1)]  # epochs 1 .. epoch + 1
    assert all(len(e) == len(epochs[0]) for e in epochs)

    interrupted = loader(workers)
    for _ in range(epoch - 1):
        assert _epoch(interrupted) == epochs[_]
    stop = round(stop_fraction * len(interrupted))
    seen: list[Any] = []
    if stop:
        for batch in interrupted:
            seen.append(batch)
            if len(seen) == stop:
                break
    state = interrupted.state_dict()
    before = _epoch(seen)

    resumed = loader(resume_workers)
    resumed.load_state_dict(state)
    rest = _epoch(resumed)
    following = _epoch(resumed)
    same_topology = max(workers, 1) == max(resume_workers, 1)
    expected = epochs[epoch - 1]
    if same_topology:
        assert before + rest == expected
        assert following == epochs[epoch]
    else:
        combined = Counter(before + rest)
        assert max(combined.values(), default=1) == 1, "a sample was delivered twice"
        if drop_last:
            assert set(combined) <= set(expected)
            assert len(expected) - sum(combined.values()) < batch_size  # the new split drops < 1 batch
        else:
            assert sorted(combined) == sorted(expected)
        assert len(set(following)) == len(following)
        if not drop_last:
            assert sorted(following) == sorted(epochs[epoch])
