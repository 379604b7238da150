"""Streaming local Parquet folders: indexing, auto-indexing, wildcards, workers, resume, DDP, views."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from litdata_format import ParquetLoader, PyTreeLoader
from litdata_stream import StreamingDataLoader, StreamingDataset, train_test_split
from litdata_stream._parquet_index import index_parquet_dataset

ROWS = 17  # per file: batches straddle files


def _write(path: Path, files: int = 4, rows: int = ROWS, prefix: str = "train") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        table = pa.table({"id": ids, "text": [f"t{i}" for i in ids], "score": [i * 0.5 for i in ids]})
        pq.write_table(table, path / f"{prefix}-{f:03d}.parquet", row_group_size=5)
    return path


def _ids(batches: list[Any]) -> list[int]:
    return [int(i) for batch in batches for i in batch["id"]]


def test_index_has_upstreams_layout(tmp_path: Path) -> None:
    path = _write(tmp_path / "pq", files=2)
    (path / "sub").mkdir()
    pq.write_table(pa.table({"other": [1]}), path / "sub" / "nested.parquet")  # subfolders are not indexed
    (path / "notes.txt").write_text("not data")
    written = index_parquet_dataset(str(path))
    assert written == str(path / "index.json")
    index = json.loads((path / "index.json").read_text())
    assert set(index) == {"chunks", "config", "updated_at"}
    assert index["config"] == {
        "chunk_bytes": None,
        "chunk_size": None,
        "compression": None,
        "data_format": ["int64", "string", "double"],
        "data_spec": None,
        "encryption": None,
        "item_loader": "ParquetLoader",
        "types": None,
    }
    assert index["chunks"] == [
        {"chunk_bytes": (path / n).stat().st_size, "chunk_size": ROWS, "dim": None, "filename": n}
        for n in ("train-000.parquet", "train-001.parquet")
    ]
    elsewhere = tmp_path / "elsewhere"
    assert index_parquet_dataset(str(path), cache_dir=str(elsewhere)) == str(elsewhere / "index.json")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["index.json"]  # no temp file left behind


def test_auto_index_on_first_use_and_reads_rows(tmp_path: Path) -> None:
    path = _write(tmp_path / "pq")
    ds = StreamingDataset(str(path))
    assert isinstance(ds.item_loader, ParquetLoader)
    assert (path / "index.json").is_file()  # where upstream puts it
    assert not [p for p in path.iterdir() if p.name.startswith(".")]
    assert len(ds) == 4 * ROWS
    assert ds[0] == {"id": 0, "text": "t0", "score": 0.0}
    assert ds[-1]["id"] == 4 * ROWS - 1
    assert [s["id"] for s in ds.__getitems__([40, 3, 41, 66])] == [40, 3, 41, 66]
    assert [s["id"] for s in ds] == list(range(4 * ROWS))
    explicit = StreamingDataset(str(path), item_loader=ParquetLoader(low_memory=False, columns=["id"]))
    assert explicit[20] == {"id": 20}


def test_index_path_elsewhere(tmp_path: Path) -> None:
    path = _write(tmp_path / "pq", files=2)
    index_parquet_dataset(str(path), cache_dir=str(tmp_path / "idx"))
    for where in (tmp_path / "idx", tmp_path / "idx" / "index.json"):
        ds = StreamingDataset(str(path), item_loader=ParquetLoader(), index_path=str(where))
        assert len(ds) == 2 * ROWS and ds[18]["id"] == 18
    assert not (path / "index.json").exists()


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """``path`` cannot be written to, even by root (who ignores permission bits: the folder is
    made immutable instead)."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(0o755)
        return
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_read_only_folder_is_indexed_into_the_cache(tmp_path: Path) -> None:
    path = _write(tmp_path / "pq", files=2)
    with _read_only(path):
        with pytest.raises(PermissionError):
            (path / "probe").write_bytes(b"")
        ds = StreamingDataset(str(path), cache_dir=str(tmp_path / "cache"))
        assert len(ds) == 2 * ROWS and not (path / "index.json").exists()
        assert list((tmp_path / "cache").rglob("index.json"))


def test_wildcards_select_files(tmp_path: Path) -> None:
    path = _write(tmp_path / "pq", files=3)
    _write(path, files=1, prefix="test")
    ds = StreamingDataset(str(path / "train-00[02].parquet"))
    assert len(ds) == 2 * ROWS
    assert [s["id"] for s in ds] == list(range(ROWS)) + list(range(2 * ROWS, 3 * ROWS))
    assert len(StreamingDataset(str(path / "test-*.parquet"))) == ROWS
    assert len(StreamingDataset(str(path / "train-001.parquet"))) == ROWS
    with pytest.raises(FileNotFoundError, match=r"no file matches 'val-\*\.parquet'"):
        StreamingDataset(str(path / "val-*.parquet"))


def test_schema_mismatch_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "pq", files=2)
    pq.write_table(pa.table({"id": ["x"], "text": ["y"], "score": [1.0]}), path / "train-009.parquet")
    with pytest.raises(ValueError, match=r"train-009\.parquet: its schema differs from .*train-000\.parquet.*"
                       r"column 'id': int64 vs string"):  # fmt: skip
        StreamingDataset(str(path))
    assert not (path / "index.json").exists()


def test_bad_inputs(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no index.json here"):
        StreamingDataset(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="no .parquet file directly in the folder"):
        index_parquet_dataset(str(tmp_path / "empty"))
    path = _write(tmp_path / "pq", files=1)
    (path / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(ValueError, match=r"broken\.parquet: not a Parquet file"):
        index_parquet_dataset(str(path))
    with pytest.raises(FileNotFoundError, match="not a directory"):
        StreamingDataset(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="it is being read with PyTreeLoader"):
        StreamingDataset(str(_write(tmp_path / "ok", files=1)), item_loader=PyTreeLoader())


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers(tmp_path: Path, context: str) -> None:
    ds = StreamingDataset(str(_write(tmp_path / "pq")), shuffle=True)
    ds[0]  # pyarrow has read in the parent before the workers start (the fork hazard, if any)
    loader = StreamingDataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=context)
    got = _ids(list(loader))
    assert sorted(got) == list(range(4 * ROWS)) and got != list(range(4 * ROWS))


def test_resume_mid_epoch_with_workers(tmp_path: Path) -> None:
    path = str(_write(tmp_path / "pq"))

    def make() -> StreamingDataLoader:
        return StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=3, num_workers=2)

    full = _ids(list(make()))
    loader = make()
    seen: list[Any] = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 7:
            break
    resumed = make()
    resumed.load_state_dict(loader.state_dict())
    rest = _ids(list(resumed))
    assert _ids(seen) + rest == full  # nothing repeated, nothing lost, same order


def test_ranks_get_equal_disjoint_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(_write(tmp_path / "pq"))
    StreamingDataset(path)  # index once, before the "ranks"
    monkeypatch.setenv("WORLD_SIZE", "3")
    per_rank = []
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=0)
        per_rank.append(_ids(list(loader)))
    assert len({len(ids) for ids in per_rank}) == 1
    everything = [i for ids in per_rank for i in ids]
    assert len(everything) == len(set(everything)) == (4 * ROWS // 12) * 12


def test_subset_subsample_and_split(tmp_path: Path) -> None:
    path = str(_write(tmp_path / "pq"))
    sub = StreamingDataset(path).subset(range(10, 30))
    assert [s["id"] for s in sub] == list(range(10, 30))
    assert len(StreamingDataset(path, subsample=0.5)) == 34
    train, test = train_test_split(StreamingDataset(path, shuffle=True), splits=[0.75, 0.25])
    ids = sorted([s["id"] for s in train] + [s["id"] for s in test])
    assert ids == list(range(4 * ROWS))


def test_opening_a_parquet_folder_reads_the_mount_table_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The folder is resolved once (test_local_stream.py); indexing its files does not resolve it again.
    from litdata_io import _mounts

    read = _mounts._read_mount_table
    reads: list[str | None] = []

    def counted(mountinfo: str | None) -> str | None:
        reads.append(mountinfo)
        return read(mountinfo)

    path = _write(tmp_path / "pq")
    monkeypatch.setattr(_mounts, "_read_mount_table", counted)
    assert len(StreamingDataset(str(path), item_loader=ParquetLoader())) == 4 * ROWS
    assert len(reads) == 1 and (path / "index.json").is_file()  # indexed by this open
