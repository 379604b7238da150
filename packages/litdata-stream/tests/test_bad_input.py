"""Bad input gives a clear error in bounded time: no dataset, a foreign state dict, a failing
transform, an unreachable bucket, a DataLoader worker that dies."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import get_worker_info

from litdata_format import BinaryWriter
from litdata_io import StorageError
from litdata_stream import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset


def _make(path: Path, n: int = 60, chunk_size: int = 7) -> Path:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.zeros(2)})
    writer.done()
    writer.merge()
    return path


def _closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_input_dir_without_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no index.json here"):
        StreamingDataset(tmp_path)
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        StreamingDataset(tmp_path / "missing")
    (tmp_path / "remote").mkdir()
    with pytest.raises(FileNotFoundError, match="index.json"):
        StreamingDataset(f"local:{tmp_path / 'remote'}", cache_dir=str(tmp_path / "cache"))


def test_state_dict_from_another_dataset(tmp_path: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(_make(tmp_path / "a", n=60, chunk_size=7)), batch_size=4)
    next(iter(loader))
    state = loader.state_dict()
    same_size = StreamingDataLoader(StreamingDataset(_make(tmp_path / "b", n=60, chunk_size=6)), batch_size=4)
    with pytest.raises(ValueError, match="recorded on another dataset"):
        same_size.load_state_dict(state)
    forced = StreamingDataset(_make(tmp_path / "c", n=60, chunk_size=6), force_override_state_dict=True)
    with pytest.raises(ValueError, match="recorded on another dataset"):
        StreamingDataLoader(forced, batch_size=4).load_state_dict(state)
    other_size = StreamingDataLoader(StreamingDataset(_make(tmp_path / "d", n=61)), batch_size=4)
    with pytest.raises(ValueError, match="dataset of 60 samples but this one has 61"):
        other_size.load_state_dict(state)
    with pytest.raises(ValueError, match="not a StreamingDataLoader state dict"):
        other_size.load_state_dict({"epoch": 1})
    with pytest.raises(ValueError, match="state_version"):
        other_size.load_state_dict({"dataset": {"epoch": 1}, "current_epoch": 1})


def test_state_dict_of_the_earlier_release(tmp_path: Path) -> None:
    """state_version 1 (before in-chunk shuffling by hash): resumed unshuffled, refused shuffled."""
    path = _make(tmp_path / "a", n=60, chunk_size=7)
    for shuffle in (False, True):
        loader = StreamingDataLoader(StreamingDataset(path, shuffle=shuffle), batch_size=4)
        batches = iter(loader)
        seen = [int(i) for _ in range(3) for i in next(batches)["index"]]
        state = loader.state_dict()
        state["dataset"]["state_version"] = 1
        resumed = StreamingDataLoader(StreamingDataset(path, shuffle=shuffle), batch_size=4)
        if shuffle:
            with pytest.raises(ValueError, match=r"state_version 1.*dataset.set_epoch\(1\)"):
                resumed.load_state_dict(state)
            continue
        resumed.load_state_dict(state)
        rest = [int(i) for batch in resumed for i in batch["index"]]
        assert seen + rest == list(range(60))


def _fails_on_seven(sample: dict[str, Any]) -> Any:
    if int(sample["index"]) == 7:
        raise ValueError("label out of range")
    return sample


_WHERE = r"transform failed on sample 7 \(chunk .*chunk-0-1\.bin, item 0\)"


def test_transform_error_keeps_its_type_and_names_sample_and_chunk(tmp_path: Path) -> None:
    """A training script's ``except ValueError`` catches its transform's ValueError, as upstream's does."""
    ds = StreamingDataset(_make(tmp_path), transform=_fails_on_seven)
    assert ds[6]["index"] == 6
    for read in (
        lambda: ds[7],
        lambda: ds.__getitems__([1, 7]),
        lambda: list(ds),
        lambda: list(StreamingDataLoader(ds, batch_size=4)),
        lambda: list(CombinedStreamingDataset([ds, StreamingDataset(tmp_path)], iterate_over_all=True)),
        lambda: list(StreamingDataLoader(CombinedStreamingDataset([StreamingDataset(tmp_path), ds]), batch_size=4)),
    ):
        with pytest.raises(ValueError, match=rf"^label out of range\n{_WHERE}$"):  # the message, then the note
            read()


@pytest.mark.parametrize("combined", [False, True])
def test_transform_error_in_a_worker_keeps_its_type_and_traceback(tmp_path: Path, combined: bool) -> None:
    ds = StreamingDataset(_make(tmp_path), transform=_fails_on_seven)
    source = CombinedStreamingDataset([ds, StreamingDataset(tmp_path)], iterate_over_all=True) if combined else ds
    # torch re-raises the worker's error type with the worker's traceback, the note included.
    with pytest.raises(ValueError, match=rf"(?s)in DataLoader worker process.*label out of range\n{_WHERE}"):
        list(StreamingDataLoader(source, batch_size=4, num_workers=2))


def _die_in_worker(sample: Any) -> Any:
    info = get_worker_info()
    # Worker 0 only: a second death while torch shuts the loader down would be reported by torch's
    # SIGCHLD handler from inside its iterator's __del__ ("Exception ignored"), which pytest fails on.
    if info is not None and info.id == 0:
        os._exit(3)  # a segfault or the OOM killer, as the main process sees it
    return sample


@pytest.mark.timeout(120)
# torch's SIGCHLD handler may report the same death once more from the iterator's __del__ while the
# loader shuts down ("Exception ignored"); the error this test asserts is the first report.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path), transform=_die_in_worker)
    with pytest.raises(RuntimeError, match="DataLoader worker .* exited unexpectedly"):
        list(StreamingDataLoader(ds, batch_size=4, num_workers=2))


@pytest.mark.timeout(60)  # the retry budget is 5 s; a hang fails here, no timed assertion
@pytest.mark.parametrize("scheme", ["http", "s3"])
def test_unreachable_bucket_fails_fast_and_says_where(tmp_path: Path, scheme: str) -> None:
    port = _closed_port()
    options: dict[str, Any] = {"max_retries": 2, "timeout": 2, "retry_deadline": 5, "backoff_base": 0.01}
    if scheme == "http":
        url = f"http://127.0.0.1:{port}/data"
    else:
        url = "s3://bucket/data"
        options |= {"endpoint_url": f"http://127.0.0.1:{port}", "aws_access_key_id": "k", "aws_secret_access_key": "s"}
    with pytest.raises(StorageError, match=r"index\.json failed after 3 attempts.*retry budget"):
        StreamingDataset(url, cache_dir=str(tmp_path / "cache"), storage_options=options)
