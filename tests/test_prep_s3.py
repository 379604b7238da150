"""optimize, map and merge_datasets into an S3-compatible server, then streamed back."""

from __future__ import annotations

from pathlib import Path

import pytest

from litdata import StreamingDataLoader, StreamingDataset, map, merge_datasets, optimize
from litdata_io import get_storage
from litdata_prep import WorkerError
from tests.support import prep_e2e_fns as fns
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud


def _keys(server: S3Server, url: str) -> list[str]:
    return [info.key for info in get_storage(url, server.storage_options()).list("")]


def test_optimize_into_s3_then_stream(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/datasets/run_{{%Y}}"
    options = s3_server.storage_options()
    optimize(fns.compress, list(range(120)), url, chunk_size=10, num_workers=2, storage_options=options,
             verbose=False, start_method="fork")  # fmt: skip
    keys = [k for k in _keys(s3_server, f"s3://{s3_bucket}") if k.startswith("datasets/run_2")]
    assert len([k for k in keys if k.endswith(".bin")]) >= 12 and any(k.endswith("/index.json") for k in keys)
    assert not any("staging" in k or ".checkpoints" in k for k in keys)
    resolved = "s3://" + s3_bucket + "/" + keys[0].rsplit("/", 1)[0]
    ds = StreamingDataset(resolved, storage_options=options, cache_dir=str(tmp_path / "cache"), shuffle=True)
    assert len(ds) == 120
    loader = StreamingDataLoader(ds, batch_size=10, num_workers=2)
    got = sorted((int(a), int(b)) for x, y in loader for a, b in zip(x, y))
    assert got == [(i, i**2) for i in range(120)]

    with pytest.raises(ValueError, match="already holds an optimized dataset"):
        optimize(fns.compress, [1], resolved, chunk_size=10, storage_options=options, verbose=False)
    optimize(fns.compress, list(range(120, 150)), resolved, chunk_size=10, num_workers=2, storage_options=options,
             mode="append", verbose=False, start_method="fork", keep_data_ordered=True)  # fmt: skip
    ds = StreamingDataset(resolved, storage_options=options, cache_dir=str(tmp_path / "cache2"))
    assert sorted(ds[120:]) == [(i, i**2) for i in range(120, 150)]
    assert sorted(ds[:]) == [(i, i**2) for i in range(150)]


def test_optimize_checkpoint_and_overwrite_in_s3(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/ckpt"
    options = s3_server.storage_options()
    optimize(fns.compress, list(range(40)), url, chunk_size=3, num_workers=2, use_checkpoint=True,
             storage_options=options, verbose=False)  # fmt: skip
    assert not any(k.startswith(".checkpoints/") for k in _keys(s3_server, url))
    optimize(fns.compress, list(range(5)), url, chunk_size=3, num_workers=1, mode="overwrite",
             storage_options=options, verbose=False, start_method="fork")  # fmt: skip
    assert sorted(_keys(s3_server, url)) == ["chunk-0-0.bin", "chunk-0-1.bin", "index.json"]
    ds = StreamingDataset(url, storage_options=options, cache_dir=str(tmp_path / "cache"))
    assert ds[:] == [(i, i**2) for i in range(5)]


def test_map_into_s3(s3_server: S3Server, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/mapped"
    map(fns.write_square, list(range(9)), url, num_workers=2, storage_options=s3_server.storage_options(),
        verbose=False)  # fmt: skip
    storage = get_storage(url, s3_server.storage_options())
    assert sorted(_keys(s3_server, url)) == sorted(f"{i}.txt" for i in range(9))
    assert storage.get("4.txt") == b"16"
    with pytest.raises(ValueError, match="not empty"):
        map(fns.write_square, [1], url, error_when_not_empty=True, storage_options=s3_server.storage_options())


def test_merge_datasets_in_s3(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    options = s3_server.storage_options()
    urls = [f"s3://{s3_bucket}/part{i}" for i in range(2)]
    for i, url in enumerate(urls):
        optimize(fns.fn, list(range(i * 10, i * 10 + 10)), url, chunk_size=4, num_workers=1, storage_options=options,
                 verbose=False, start_method="fork")  # fmt: skip
    local = str(tmp_path / "local-part")
    optimize(fns.fn, list(range(20, 25)), local, chunk_size=4, num_workers=1, verbose=False, start_method="fork")
    merge_datasets([*urls, local], f"s3://{s3_bucket}/merged", storage_options=options)
    ds = StreamingDataset(f"s3://{s3_bucket}/merged", storage_options=options, cache_dir=str(tmp_path / "cache"))
    assert ds[:] == list(range(25))


def test_remote_input_dir_files_are_downloaded_for_fn(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    options = s3_server.storage_options()
    raw = get_storage(f"s3://{s3_bucket}/raw", options)
    for i in range(6):
        raw.put(f"f{i}.bin", b"x" * (10 + i))
    inputs = [f"s3://{s3_bucket}/raw/f{i}.bin" for i in range(6)]
    out = str(tmp_path / "out")
    optimize(fns.file_size, inputs, out, input_dir=f"s3://{s3_bucket}/raw", chunk_size=2, num_workers=2,
             storage_options=options, verbose=False, start_method="fork")  # fmt: skip
    rows = sorted(StreamingDataset(out), key=lambda r: r["name"])
    assert [(r["name"], r["size"], r["local"]) for r in rows] == [(f"f{i}.bin", 10 + i, True) for i in range(6)]


@pytest.mark.parametrize("num_downloaders", [0, 3])
def test_num_downloaders_fetch_ahead_and_inputs_sharing_a_file_each_get_it(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, num_downloaders: int
) -> None:
    options = s3_server.storage_options()
    raw = get_storage(f"s3://{s3_bucket}/raw", options)
    for i in range(4):
        raw.put(f"sub/f{i}.bin", b"y" * (20 + i))
    names = ["f0", "f1", "f0", "f2", "f0", "f3", "f1"]  # f0 is still needed after the first input using it ends
    inputs = [f"s3://{s3_bucket}/raw/sub/{n}.bin" for n in names]
    out = str(tmp_path / "out")
    optimize(fns.file_size, inputs, out, input_dir=f"s3://{s3_bucket}/raw", chunk_size=3, num_workers=1,
             num_downloaders=num_downloaders, keep_data_ordered=True, storage_options=options, verbose=False,
             start_method="fork")  # fmt: skip
    rows = list(StreamingDataset(out))
    assert [(r["name"], r["size"], r["local"]) for r in rows] == [(f"{n}.bin", 20 + int(n[1]), True) for n in names]


def test_a_missing_input_file_stops_the_job_naming_the_input(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    options = s3_server.storage_options()
    get_storage(f"s3://{s3_bucket}/raw", options).put("here.bin", b"z")
    inputs = [f"s3://{s3_bucket}/raw/here.bin", f"s3://{s3_bucket}/raw/gone.bin"]
    with pytest.raises(WorkerError, match="gone.bin"):
        optimize(
            fns.file_size,
            inputs,
            str(tmp_path / "out"),
            input_dir=f"s3://{s3_bucket}/raw",
            chunk_size=3,
            num_workers=1,
            num_downloaders=2,
            storage_options=options,
            verbose=False,
            start_method="fork",
        )
