"""optimize's compression levels, and upstream's I/O knobs: num_downloaders, optimize_dns, broadcast_paths."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from typing import Any

import pytest

from litdata_format import DatasetReader, load_index
from litdata_prep import map, optimize
from litdata_prep._checks import _WARNED, check_knobs

fns: Any = importlib.import_module("prep_fns")
FORK = {"start_method": "fork", "verbose": False}


@pytest.mark.parametrize(
    ("options", "first_bytes", "config"),
    [
        ({"compression": "zstd", "compression_level": "batch"}, b"LDFZ01\0\0", ("zstd", "batch", 256)),
        ({"compression": "zstd:5", "compression_batch_size": 3}, b"LDFZ01\0\0", ("zstd:5", "batch", 3)),
        ({"compression": "zstd", "compression_level": "sample"}, b"\x07\0\0\0", ("zstd", "sample", None)),
    ],
)
def test_optimize_writes_in_file_zstd(
    tmp_path: Path, options: dict[str, Any], first_bytes: bytes, config: tuple[Any, ...]
) -> None:
    optimize(fns.square_array, list(range(30)), tmp_path / "out", chunk_size=7, num_workers=2, **options, **FORK)
    index = load_index(tmp_path / "out")
    assert (index.config["compression"], index.config["compression_level"], index.config["compression_batch_size"]) == (
        config
    )
    assert all(c.filename.endswith(".bin") and ".zstd" not in c.filename for c in index.chunks)
    first = (tmp_path / "out" / index.chunks[0].filename).read_bytes()
    assert first.startswith(first_bytes) and index.chunks[0].chunk_bytes == len(first)
    assert sorted(s["i"] for s in DatasetReader(tmp_path / "out")) == list(range(30))


def test_optimize_writes_dicts_of_json_values_as_arrow_rows(tmp_path: Path) -> None:
    # Two workers whose first samples have other keys still merge: the config does not depend on them.
    optimize(fns.varying_record, list(range(30)), tmp_path / "out", chunk_size=7, num_workers=2, compression="zstd",
             keep_data_ordered=True, **FORK)  # fmt: skip
    index = load_index(tmp_path / "out")
    assert (index.config["compression"], index.config["ipc_compression"], index.data_format) == (None, "zstd", ["json"])
    assert all((tmp_path / "out" / c.filename).read_bytes().endswith(b"LDARW01\0") for c in index.chunks)
    got = sorted(DatasetReader(tmp_path / "out"), key=lambda s: s["i"])
    assert [(s["i"], s["tags"], s.get("note")) for s in got] == [
        (i, ["t"] * (i % 3), f"n{i}" if i >= 15 else None) for i in range(30)
    ]


def test_optimize_refuses_a_level_without_compression_before_starting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="also pass compression='zstd'"):
        optimize(fns.square, [1], tmp_path / "out", chunk_size=2, compression_level="batch", **FORK)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"chunk_size": 2, "chunk_bytes": "1MB"}, ValueError, "optimize: give either chunk_size or chunk_bytes"),
        ({"chunk_bytes": "lots"}, ValueError, "optimize: .*chunk_bytes"),
        ({"chunk_size": 2, "compression": "lz4"}, ValueError, "optimize: .*lz4"),
        ({"chunk_size": 2, "item_loader": "tokens"}, TypeError, "optimize: item_loader must be an item loader"),
        (
            {"chunk_size": 2, "compression": "zstd", "compression_level": "sample", "item_loader": "TOKENS"},
            ValueError,
            "optimize: compression_level='sample' works with PyTreeLoader samples only",
        ),
    ],
)
def test_optimize_checks_the_writer_options_before_anything_starts(
    tmp_path: Path, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    if options.get("item_loader") == "TOKENS":
        from litdata_format import TokensLoader

        options = {**options, "item_loader": TokensLoader()}
    with pytest.raises(error, match=message):
        optimize(fns.square, [1], tmp_path / "out", **options, **FORK)
    assert not (tmp_path / "out").exists()  # refused before the output was opened


def test_num_downloaders_must_be_a_count(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_downloaders must be a non-negative int, got -1"):
        optimize(fns.square, [1], tmp_path / "out", chunk_size=2, num_downloaders=-1, **FORK)
    with pytest.raises(ValueError, match="map: num_downloaders must be a non-negative int"):
        map(fns.write_text, [1], tmp_path / "m", num_downloaders="4", **FORK)  # pyright: ignore[reportArgumentType]


def test_optimize_dns_is_ignored_with_one_warning(tmp_path: Path) -> None:
    _WARNED.discard("optimize_dns")
    with pytest.warns(UserWarning, match="optimize_dns=True is ignored.*never changes the system's DNS"):
        optimize(fns.square, list(range(4)), tmp_path / "a", chunk_size=2, optimize_dns=True, **FORK)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process: the second job says nothing
        map(fns.write_text, list(range(2)), tmp_path / "b", optimize_dns=True, **FORK)
        optimize(fns.square, list(range(4)), tmp_path / "c", chunk_size=2, optimize_dns=False, **FORK)
    assert len(list(DatasetReader(tmp_path / "a"))) == 4


def test_broadcast_paths_warns_only_across_machines() -> None:
    _WARNED.discard("broadcast_paths")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_knobs("optimize", None, None, True, num_nodes=1) == 2  # one machine: nothing to broadcast
    with pytest.warns(UserWarning, match="broadcast_paths=True is ignored.*each node expands"):
        assert check_knobs("optimize", 0, False, True, num_nodes=3) == 0


def test_append_with_another_compression_level_is_refused(tmp_path: Path) -> None:
    # The index records one level for every chunk; a reader trusting it must not meet another kind of chunk.
    out = tmp_path / "out"
    optimize(fns.square_array, list(range(6)), out, chunk_size=4, num_workers=1, compression="zstd", **FORK)
    with pytest.raises(ValueError, match=r"different sample layout.*compression_level"):
        optimize(fns.square_array, list(range(6, 9)), out, chunk_size=4, num_workers=1, compression="zstd",
                 compression_level="batch", mode="append", **FORK)  # fmt: skip
    assert sorted(s["i"] for s in DatasetReader(out)) == list(range(6))
    optimize(
        fns.square_array, list(range(6, 9)), out, chunk_size=4, num_workers=1, compression="zstd", mode="append", **FORK
    )
    assert sorted(s["i"] for s in DatasetReader(out)) == list(range(9))


@pytest.mark.parametrize("level", ["chunk", "batch", "sample"])
def test_merge_datasets_keeps_each_level_readable(tmp_path: Path, level: str) -> None:
    from litdata_prep import merge_datasets

    for name, inputs in (("a", range(5)), ("b", range(5, 12))):
        optimize(fns.square_array, list(inputs), tmp_path / name, chunk_size=3, num_workers=1, compression="zstd",
                 compression_level=level, **FORK)  # fmt: skip
    merge_datasets([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"))
    names = [c.filename for c in load_index(tmp_path / "m").chunks]
    assert all(n.endswith(".zstd.bin") == (level == "chunk") for n in names), names
    assert [s["i"] for s in DatasetReader(tmp_path / "m")] == list(range(12))
    optimize(fns.square_array, [0], tmp_path / "c", chunk_size=3, num_workers=1, compression="zstd", **FORK)
    if level != "chunk":
        with pytest.raises(ValueError, match=r"different sample layout.*compression_level"):
            merge_datasets([str(tmp_path / "a"), str(tmp_path / "c")], str(tmp_path / "m2"))
