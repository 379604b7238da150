"""ParquetLoader: rows of Parquet files read in place, by row group, through DatasetReader."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from litdata_format import DatasetReader, ParquetLoader
from litdata_format._loaders._parquet import ParquetChunk


def _folder(path: Path, files: int = 3, rows: int = 20, row_group: int = 6) -> Path:
    """Parquet files plus the index index_parquet_dataset writes (built by hand: format is the lowest layer)."""
    path.mkdir(parents=True, exist_ok=True)
    chunks = []
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        table = pa.table({
            "id": ids,
            "text": [f"row {i}" for i in ids],
            "tags": [[i, i + 1] for i in ids],
            "blob": [bytes([i % 256]) * 3 for i in ids],
            "maybe": [None if i % 4 == 0 else i / 2 for i in ids],
        })  # fmt: skip
        name = f"part-{f:02d}.parquet"
        pq.write_table(table, path / name, row_group_size=row_group)
        chunks.append({"chunk_bytes": (path / name).stat().st_size, "chunk_size": rows, "dim": None, "filename": name})
    config = {"chunk_bytes": None, "chunk_size": None, "compression": None, "data_spec": None, "encryption": None,
              "data_format": ["int64", "string", "list<element: int64>", "binary", "double"],
              "item_loader": "ParquetLoader", "types": None}  # fmt: skip
    (path / "index.json").write_text(json.dumps({"chunks": chunks, "config": config, "updated_at": "0"}))
    return path


def _expected(i: int) -> dict[str, object]:
    return {"id": i, "text": f"row {i}", "tags": [i, i + 1], "blob": bytes([i % 256]) * 3,
            "maybe": None if i % 4 == 0 else i / 2}  # fmt: skip


@pytest.mark.parametrize("low_memory", [True, False])
def test_rows_are_dicts_of_python_values(tmp_path: Path, low_memory: bool) -> None:
    reader = DatasetReader(_folder(tmp_path), item_loader=ParquetLoader(low_memory=low_memory))
    assert len(reader) == 60
    assert [reader[i] for i in range(60)] == [_expected(i) for i in range(60)]
    assert reader[37] == _expected(37)  # again, after its row group was dropped
    reader.close()


def test_default_loader_comes_from_the_index(tmp_path: Path) -> None:
    reader = DatasetReader(_folder(tmp_path))
    assert isinstance(reader.item_loader, ParquetLoader)
    assert reader[59] == _expected(59)


def test_columns_select_what_is_read(tmp_path: Path) -> None:
    reader = DatasetReader(_folder(tmp_path), item_loader=ParquetLoader(columns=["text", "id"]))
    assert reader[3] == {"text": "row 3", "id": 3}
    bad = DatasetReader(_folder(tmp_path / "b"), item_loader=ParquetLoader(columns=["nope"]))
    with pytest.raises(ValueError, match=r"columns=\.\.\.\) names \['nope'\]"):
        bad[0]
    with pytest.raises(ValueError, match="selects no column"):
        ParquetLoader(columns=[])
    with pytest.raises(TypeError, match="list of column names"):
        ParquetLoader(columns="text")  # type: ignore[arg-type]


def test_low_memory_holds_row_groups_only_until_read(tmp_path: Path) -> None:
    path = _folder(tmp_path, files=1, rows=20, row_group=6)
    chunk = ParquetChunk(path / "part-00.parquet")
    assert len(chunk) == 20
    for i in range(7):
        chunk.row(i)
    assert sorted(chunk._rows) == [1]  # group 0 was read in full and dropped; group 1 is in use
    whole = ParquetChunk(path / "part-00.parquet", low_memory=False, preload=True)
    assert whole._table is not None and whole.row(19) == _expected(19)
    with pytest.raises(IndexError, match="row 20 is out of range"):
        chunk.row(20)
    chunk.close()


def test_loader_name_is_checked_and_pickles(tmp_path: Path) -> None:
    loader = pickle.loads(pickle.dumps(ParquetLoader(low_memory=False, columns=["id"], pre_load_chunk=True)))
    assert (loader.low_memory, loader.columns, loader.pre_load_chunk) == (False, ["id"], True)
    index = json.loads((_folder(tmp_path) / "index.json").read_text())
    index["config"]["item_loader"] = "PyTreeLoader"
    (tmp_path / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="written with PyTreeLoader, but it is being read with ParquetLoader"):
        DatasetReader(tmp_path, item_loader=ParquetLoader())
    with pytest.raises(TypeError, match="writes nothing"):
        ParquetLoader().encode({"a": 1}, 0)


def test_a_file_that_is_not_parquet_is_named(tmp_path: Path) -> None:
    path = _folder(tmp_path, files=1)
    (path / "part-00.parquet").write_bytes(b"not parquet at all" * 10)
    with pytest.raises(ValueError, match=r"part-00\.parquet: not a readable Parquet file"):
        DatasetReader(path)[0]


def test_missing_pyarrow_names_the_install_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"  # what an environment without pyarrow looks like
        "import litdata_format\n"
        "try:\n    litdata_format.ParquetLoader()\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "litdata-format[arrow]"' in out.stdout, out.stdout + out.stderr
