"""map on local disk, merge_datasets, ParquetReader, walk and local input_dir balancing."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from litdata_format import DatasetReader, load_index
from litdata_prep import DatasetExistsError, ParquetReader, WorkerError, map, merge_datasets, optimize, walk

fns: Any = importlib.import_module("prep_fns")
FORK = {"start_method": "fork", "verbose": False}


@pytest.mark.parametrize("ordered", [False, True])
def test_map_writes_files_into_output_dir(tmp_path: Path, ordered: bool) -> None:
    map(fns.write_text, list(range(12)), tmp_path / "out", num_workers=2, keep_data_ordered=ordered, **FORK)
    files = sorted((tmp_path / "out" / "sub").iterdir(), key=lambda p: int(p.stem))
    assert [p.read_text() for p in files] == [str(i * 2) for i in range(12)]
    assert not list((tmp_path / "out").glob(".litdata-staging-*"))


def test_map_publishes_only_what_fn_finished_writing(tmp_path: Path) -> None:
    # fn gets a folder of its own, as upstream's temporary one, even for a local output: a file it
    # was writing when it failed never reaches output_dir
    with pytest.raises(WorkerError, match="halfway"):
        map(fns.write_then_fail_on_three, [0, 1, 2, 3], tmp_path / "out", num_workers=1, **FORK)
    written = {p.name: p.read_text() for p in (tmp_path / "out").iterdir()}
    assert "3.txt" not in written  # inputs before it may or may not be published when the job stops
    assert set(written) <= {"0.txt", "1.txt", "2.txt"} and set(written.values()) <= {"half and whole"}


def test_map_fn_must_return_none(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match="must write its files into output_dir and return None"):
        map(fns.write_and_return, [1, 2], tmp_path / "out", num_workers=1, **FORK)


def test_map_spawn_default(tmp_path: Path) -> None:
    map(fns.write_text, [1, 2, 3], str(tmp_path / "out"), num_workers=2, verbose=False)
    assert sorted(p.name for p in (tmp_path / "out" / "sub").iterdir()) == ["1.txt", "2.txt", "3.txt"]


def test_merge_datasets(tmp_path: Path) -> None:
    dirs = []
    for part in range(3):
        out = tmp_path / f"part{part}"
        optimize(fns.identity, list(range(part * 10, part * 10 + 10)), out, chunk_size=4, num_workers=1, **FORK)
        dirs.append(str(out))
    merge_datasets(dirs, str(tmp_path / "merged"))
    assert list(DatasetReader(tmp_path / "merged")) == list(range(30))
    assert [c.filename for c in load_index(tmp_path / "merged").chunks][:2] == ["chunk-0-0.bin", "chunk-0-1.bin"]
    with pytest.raises(DatasetExistsError, match="already holds"):  # a ValueError, as upstream's
        merge_datasets(dirs, str(tmp_path / "merged"))
    with pytest.raises(ValueError, match="at least two"):
        merge_datasets(dirs[:1], str(tmp_path / "m2"))
    optimize(fns.square, [1], tmp_path / "other", chunk_size=4, num_workers=1, **FORK)
    with pytest.raises(ValueError, match="same layout"):
        merge_datasets([dirs[0], str(tmp_path / "other")], str(tmp_path / "m3"))


def test_merge_stages_each_copy_and_refuses_a_chunk_linked_from_elsewhere(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for out in dirs:
        optimize(fns.identity, list(range(8)), out, chunk_size=4, num_workers=1, **FORK)
    (tmp_path / "elsewhere").mkdir()
    (dirs[1] / "chunk-0-1.bin").rename(tmp_path / "elsewhere" / "chunk-0-1.bin")
    (dirs[1] / "chunk-0-1.bin").symlink_to(tmp_path / "elsewhere" / "chunk-0-1.bin")
    with pytest.raises(OSError, match="outside"):
        merge_datasets([str(d) for d in dirs], str(tmp_path / "merged"))
    left = [p.name for p in (tmp_path / "merged").iterdir()]
    assert "index.json" not in left and not any(name.startswith(".litdata-staging") for name in left)


def test_parquet_reader_reshards_big_files(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    paths = []
    for n in range(2):
        path = tmp_path / f"data{n}.parquet"
        pq.write_table(pa.table({"x": list(range(n * 1000, n * 1000 + 250))}), path, row_group_size=100)
        paths.append(str(path))
    reader = ParquetReader(str(tmp_path / "cache"), num_rows=64, to_pandas=False)
    optimize(fns.count_rows, paths, tmp_path / "out", chunk_size=10, reader=reader, num_workers=2,
             keep_data_ordered=True, **FORK)  # fmt: skip
    rows = list(DatasetReader(tmp_path / "out"))
    assert [r["n"] for r in rows] == [64, 64, 64, 58] * 2
    assert [r["first"] for r in rows] == [0, 64, 128, 192, 1000, 1064, 1128, 1192]
    assert len(list((tmp_path / "cache" / "64").iterdir())) == 8


def test_walk_lists_every_folder(tmp_path: Path) -> None:
    for sub in ("a", "a/b", "c"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "f.txt").write_text("x")
    found = {str(Path(folder).relative_to(tmp_path)): files for folder, _, files in walk(str(tmp_path), 2)}
    assert found == {".": [], "a": ["f.txt"], "a/b": ["f.txt"], "c": ["f.txt"]}


def test_local_input_dir_balances_by_file_size(tmp_path: Path) -> None:
    files = []
    for i, size in enumerate([5000, 10, 10, 10, 10, 4000]):
        path = tmp_path / "in" / f"{i}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * size)
        files.append(str(path))
    optimize(fns.file_len, files, tmp_path / "out", input_dir=str(tmp_path / "in"), chunk_size=2, num_workers=2,
             keep_data_ordered=True, **FORK)  # fmt: skip
    rows = list(DatasetReader(tmp_path / "out"))
    assert sorted(r["size"] for r in rows) == [10, 10, 10, 10, 4000, 5000]
    first_worker = [c.chunk_size for c in load_index(tmp_path / "out").chunks if c.filename.startswith("chunk-0-")]
    assert sum(first_worker) in (1, 2, 3, 4, 5)
