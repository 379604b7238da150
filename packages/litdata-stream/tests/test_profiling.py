"""StreamingDataLoader profiling: a viztracer trace of worker 0, or cProfile of main and worker 0."""

from __future__ import annotations

import json
import pstats
from pathlib import Path

import numpy as np
import pytest
import torch

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset


def _make(path: Path, n: int = 120) -> Path:
    writer = BinaryWriter(path, chunk_size=10)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.zeros(4)})
    writer.done()
    writer.merge()
    return path


def _trace_events(path: Path) -> list[dict]:
    return json.loads(path.read_text())["traceEvents"]


def _loads(events: list[dict]) -> int:
    """Samples decoded while tracing."""
    return sum(1 for e in events if e.get("ph") == "X" and e.get("name", "").startswith("PyTreeLoader.load "))


def test_trace_of_some_batches_of_worker_zero(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path / "data"), shuffle=True)
    out = tmp_path / "profiles"
    loader = StreamingDataLoader(
        ds, batch_size=4, num_workers=2, profile_batches=3, profile_skip_batches=2, profile_dir=str(out)
    )
    assert len(list(loader)) == 30  # profiling changes nothing about what is delivered
    events = _trace_events(out / "result.json")
    names = {e.get("name", "") for e in events}
    assert any("read_batches" in name for name in names)  # the reading loop (StreamingReader.read_batches) was traced
    assert any("litdata_collate" in name for name in names)
    # Exactly 3 batches of 4 samples of worker 0 were recorded.
    assert _loads(events) == 3 * 4


def test_trace_of_the_whole_worker_life(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    stale = tmp_path / "profiles" / "result.json"
    stale.write_text("old")
    ds = StreamingDataset(_make(tmp_path / "data", n=40))
    loader = StreamingDataLoader(ds, batch_size=4, num_workers=1, profile_batches=True, profile_dir=str(stale.parent))
    assert len(list(loader)) == 10
    assert _loads(_trace_events(stale)) == 40  # all 10 batches of the only worker


def test_cprofile_writes_main_and_worker_stats(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path / "data"))
    out = tmp_path / "cprof"
    loader = StreamingDataLoader(ds, batch_size=8, num_workers=2, profile_cprofile=True, profile_dir=str(out))
    assert len(list(loader)) == 15
    names = sorted(p.name for p in out.iterdir())
    assert names == ["cprofile_main.prof", "cprofile_main.txt", "cprofile_worker0.prof", "cprofile_worker0.txt"]
    worker = pstats.Stats(str(out / "cprofile_worker0.prof"))
    functions = {name for _, _, name in worker.stats}  # type: ignore[attr-defined]
    assert "__iter__" in functions and "load" in functions
    assert "by tottime" in (out / "cprofile_worker0.txt").read_text()


def test_profiling_reads_batches_as_an_unprofiled_loader_does(tmp_path: Path) -> None:
    # Fixed-size numpy samples are gathered a batch at a time, profiled or not. Chunks of ~80 KiB: chunk
    # files of at most 64 KiB take the small-chunk path (rows read straight from the files, no gather).
    writer = BinaryWriter(tmp_path / "data", chunk_size=10)
    for i in range(120):
        writer.add_item(i, {"index": i, "x": np.zeros(2048, dtype=np.float32)})
    writer.done()
    writer.merge()
    out = tmp_path / "cprof"
    ds = StreamingDataset(tmp_path / "data")
    loader = StreamingDataLoader(ds, batch_size=8, num_workers=2, profile_cprofile=True, profile_dir=str(out))
    assert [b["index"].tolist() for b in loader] == [b["index"].tolist() for b in StreamingDataLoader(
        StreamingDataset(tmp_path / "data"), batch_size=8, num_workers=2
    )]  # fmt: skip
    calls = {key[2]: value[1] for key, value in pstats.Stats(str(out / "cprofile_worker0.prof")).stats.items()}  # type: ignore[attr-defined]
    # worker 0 read 60 samples: a gather per batch piece, and one decode per chunk it read from
    # (the layout's reference), never one per sample
    assert calls["gather"] >= 8 and calls["load"] <= 12


def test_cprofile_without_workers_writes_the_main_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # profile_dir defaults to the current directory
    ds = StreamingDataset(_make(tmp_path / "data", n=20))
    loader = StreamingDataLoader(ds, batch_size=5, profile_cprofile=True)
    assert len(list(loader)) == 4
    assert sorted(p.name for p in tmp_path.glob("cprofile_*")) == ["cprofile_main.prof", "cprofile_main.txt"]
    functions = {name for _, _, name in pstats.Stats(str(tmp_path / "cprofile_main.prof")).stats}  # type: ignore[attr-defined]
    assert "load" in functions  # num_workers=0 reads in the main process


def test_user_worker_init_fn_still_runs(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path / "data", n=20))
    seen = tmp_path / "seen"
    seen.mkdir()
    loader = StreamingDataLoader(
        ds,
        batch_size=5,
        num_workers=2,
        profile_cprofile=True,
        profile_dir=str(tmp_path / "p"),
        worker_init_fn=_touch(seen),
    )
    assert len(list(loader)) == 4
    assert sorted(p.name for p in seen.iterdir()) == ["0", "1"]


class _touch:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, worker_id: int) -> None:
        (self.folder / str(worker_id)).touch()


def test_profile_errors(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path / "data", n=10))
    with pytest.raises(ValueError, match="enable only one of them"):
        StreamingDataLoader(ds, num_workers=1, profile_batches=5, profile_cprofile=True)
    with pytest.raises(ValueError, match="needs num_workers >= 1"):
        StreamingDataLoader(ds, num_workers=0, profile_batches=5)
    with pytest.raises(ValueError, match="needs num_workers >= 1"):
        StreamingDataLoader(ds, num_workers=0, profile_batches=True)
    with pytest.raises(ValueError, match="profile_batches must be"):
        StreamingDataLoader(ds, num_workers=1, profile_batches=-1)
    with pytest.raises(ValueError, match="profile_skip_batches must be"):
        StreamingDataLoader(ds, num_workers=1, profile_batches=1, profile_skip_batches=-2)
    StreamingDataLoader(ds, num_workers=0, profile_batches=False)  # off: fine without workers


def test_profiling_with_spawned_workers(tmp_path: Path) -> None:
    ds = StreamingDataset(_make(tmp_path / "data", n=20))
    out = tmp_path / "p"
    loader = StreamingDataLoader(
        ds, batch_size=5, num_workers=1, multiprocessing_context="spawn", profile_cprofile=True, profile_dir=str(out)
    )
    assert sorted(int(i) for b in loader for i in b["index"]) == list(range(20))
    assert (out / "cprofile_worker0.prof").exists() and (out / "cprofile_main.prof").exists()
