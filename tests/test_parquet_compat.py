"""Parquet indexes move both ways between this project and the real upstream litdata 0.2.76."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from litdata_format import ParquetLoader
from litdata_stream import StreamingDataset, index_parquet_dataset
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]

UPSTREAM_INDEX = """
import pickle, sys
from litdata import index_parquet_dataset
index_parquet_dataset(sys.argv[2], num_workers=2)
with open(sys.argv[1], "wb") as f:
    pickle.dump(None, f)
"""

UPSTREAM_READ = """
import pickle, sys
from litdata import StreamingDataset
from litdata.streaming.item_loader import ParquetLoader
rows = []
for low_memory in (True, False):
    ds = StreamingDataset(sys.argv[2], item_loader=ParquetLoader(low_memory=low_memory))
    rows.append([ds[i] for i in range(len(ds))])
with open(sys.argv[1], "wb") as f:
    pickle.dump(rows, f)
"""


def _folder(path: Path) -> list[dict[str, Any]]:
    """Three Parquet files with assorted column types; returns every row in file order."""
    path.mkdir(parents=True)
    rows: list[dict[str, Any]] = []
    for f in range(3):
        ids = list(range(f * 11, (f + 1) * 11))
        table = pa.table({
            "id": pa.array(ids, pa.int32()),
            "text": [f"sample {i}" for i in ids],
            "tokens": [list(range(i % 4)) for i in ids],
            "meta": [{"ok": i % 2 == 0, "w": i / 3} for i in ids],
            "raw": [bytes([i]) * 2 for i in ids],
            "maybe": [None if i % 5 == 0 else float(i) for i in ids],
        })  # fmt: skip
        pq.write_table(table, path / f"part-{f}.parquet", row_group_size=4)
        rows.extend(table.to_pylist())
    return rows


def test_upstream_index_reads_here(tmp_path: Path) -> None:
    rows = _folder(tmp_path / "pq")
    run_upstream(UPSTREAM_INDEX, str(tmp_path / "pq"))
    theirs = json.loads((tmp_path / "pq" / "index.json").read_text())
    ours = json.loads(Path(index_parquet_dataset(str(tmp_path / "pq"), cache_dir=str(tmp_path / "ours"))).read_text())
    assert ours["config"] == theirs["config"]
    assert sorted(ours["chunks"], key=lambda c: c["filename"]) == sorted(theirs["chunks"], key=lambda c: c["filename"])
    ds = StreamingDataset(str(tmp_path / "pq"))  # upstream's index.json, in upstream's file order
    assert isinstance(ds.item_loader, ParquetLoader)
    order = [c["filename"] for c in theirs["chunks"]]
    expected = [r for name in order for r in rows[int(name[5]) * 11 : int(name[5]) * 11 + 11]]
    assert [ds[i] for i in range(len(ds))] == expected


def test_our_index_reads_in_upstream(tmp_path: Path) -> None:
    rows = _folder(tmp_path / "pq")
    StreamingDataset(str(tmp_path / "pq"))  # writes index.json into the folder, as upstream does
    low, high = run_upstream(UPSTREAM_READ, str(tmp_path / "pq"))
    assert low == rows
    assert high == rows
