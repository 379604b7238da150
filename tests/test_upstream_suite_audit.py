"""What upstream LitData's own test files assert on public behaviour, checked on this library.

docs/compat.md lists, for each upstream test file audited, the differences found and whether they
are gone (a test here) or listed there with the reason. Each section below is named after the
upstream test file it answers; the tests are written for this library, not copied.
"""

from __future__ import annotations

import datetime
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image as PILImage

from litdata import StreamingRawDataset, map, optimize, train_test_split
from litdata.raw.indexer import FileIndexer
from litdata.streaming import Cache, StreamingDataset, TokensLoader
from litdata.streaming.item_loader import ParquetLoader, PyTreeLoader
from litdata.streaming.resolver import Dir, resolve_dir
from litdata.streaming.serializers import Serializer
from litdata.streaming.writer import BinaryWriter, index_parquet_dataset
from litdata.utilities.hf_dataset import index_hf_dataset

# --- tests/streaming/test_writer.py ----------------------------------------------------------


def test_an_unknown_compression_is_refused_in_upstreams_words(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="The provided compression something_else isn't available") as e:
        BinaryWriter(tmp_path, chunk_size=2, compression="something_else")
    assert "use 'zstd'" in str(e.value)  # and ours says what to give instead


def test_samples_are_added_with_item_assignment_too(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=5)
    for i in [2, 3, 1, 4, 6, 5, 7, 8, 11, 9, 10, 12]:  # out of order, as upstream allows
        writer[i] = i - 1
    writer.done()
    writer.merge()
    index = json.loads((tmp_path / "index.json").read_text())
    assert [c["chunk_size"] for c in index["chunks"]] == [5, 5, 2]
    for chunk in index["chunks"]:  # the index's byte counts are the files' sizes
        assert (tmp_path / chunk["filename"]).stat().st_size == chunk["chunk_bytes"]


def test_a_leaf_of_another_kind_is_refused_in_upstreams_words(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=5)
    writer[0] = {"x": 1, "y": np.zeros(2)}  # an array: not a row of JSON-like values, whose kinds may widen
    with pytest.raises(TypeError, match="The provided item should be of type") as e:
        writer[1] = {"x": "two", "y": np.zeros(2)}
    assert "sample 1" in str(e.value) and "sample['x']" in str(e.value)  # ours names the sample and leaf


def test_eleven_rank_indexes_merge_in_rank_order(tmp_path: Path) -> None:
    for rank in range(11):  # "10.index.json" sorts before "2.index.json" as text
        writer = BinaryWriter(tmp_path, chunk_size=1, rank=rank)
        writer[rank] = rank
        writer.done()
    BinaryWriter(tmp_path, chunk_size=1).merge(num_workers=11)
    index = json.loads((tmp_path / "index.json").read_text())
    assert [c["filename"] for c in index["chunks"]] == [f"chunk-{r}-0.bin" for r in range(11)]


# --- tests/streaming/test_cache.py -----------------------------------------------------------


def test_a_sample_bigger_than_chunk_bytes_is_warned_about_in_upstreams_words(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path), chunk_bytes=9000)
    sizes = [500, 10_000, 150, 200]  # the 10 KB sample cannot share a chunk, so it is one alone
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, size in enumerate(sizes[:2]):
            cache[i] = np.zeros(size, dtype=np.uint8)
    assert caught == []
    # Its chunk is written when the next sample comes, as upstream's warning comes then too.
    with pytest.warns(UserWarning, match=r"An item was larger than the target chunk size \(9.0 KB\)") as record:
        cache[2] = np.zeros(sizes[2], dtype=np.uint8)
    assert "holds sample 1 alone" in str(record[0].message)
    cache[3] = np.zeros(sizes[3], dtype=np.uint8)
    cache.done()
    cache.merge()
    index = json.loads((tmp_path / "index.json").read_text())
    assert [(c["filename"], c["chunk_size"]) for c in index["chunks"]] == [
        ("chunk-0-0.bin", 1),
        ("chunk-0-1.bin", 1),
        ("chunk-0-2.bin", 2),
    ]


class Custom:
    pass


class CustomSerializer(Serializer):
    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return b"\x01\x02", None

    def deserialize(self, data: Any) -> Any:
        return data

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, Custom)


def test_a_serializer_of_your_own_is_given_bytes(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path), serializers={"custom": CustomSerializer()}, chunk_size=1)
    for i in range(3):
        cache[i] = (Custom(),)
    cache.done()
    cache.merge()
    assert cache[0][0] == b"\x01\x02" and type(cache[0][0]) is bytes  # as upstream: .decode() works on it


def test_an_image_path_in_a_dict_is_stored_as_the_image(tmp_path: Path) -> None:
    pixels = np.random.default_rng(0).integers(0, 255, size=(28, 28), dtype=np.uint8)
    path = tmp_path / "img.png"
    PILImage.fromarray(pixels).save(path)
    cache = Cache(str(tmp_path / "cache"), chunk_size=10)
    cache[0] = {"image": str(path), "class": 3}  # a dict of a str and an int, but the str is a file
    cache.done()
    cache.merge()
    for sample in (cache[0], StreamingDataset(str(tmp_path / "cache"))[0]):
        assert isinstance(sample["image"], torch.Tensor) and sample["image"].shape == (3, 28, 28)
        assert torch.equal(sample["image"][0], torch.from_numpy(pixels)) and sample["class"] == 3
    index = json.loads((tmp_path / "cache" / "index.json").read_text())
    assert index["config"]["data_format"] == ["image:png", "int"]


def test_a_path_to_another_kind_of_file_in_a_dict_stays_text(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    cache = Cache(str(tmp_path / "cache"), chunk_size=10)
    cache[0] = {"path": str(notes), "n": 1}  # upstream pickles this str; here it stays text: the same value back
    cache.done()
    cache.merge()
    assert cache[0] == {"path": str(notes), "n": 1}


def test_a_token_dataset_read_without_tokens_loader_names_it(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path), chunk_size=12, item_loader=TokensLoader(block_size=4))
    cache[0] = torch.arange(12, dtype=torch.int32)
    cache.done()
    cache.merge()
    with pytest.raises(ValueError, match="TokensLoader"):
        len(Cache(str(tmp_path), chunk_size=12))


# --- tests/streaming/test_resolver.py --------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "variable"),
    [
        ("/teamspace/s3_connections/imagenet", "LIGHTNING_CLOUD_PROJECT_ID"),
        ("/teamspace/gcs_connections/my_dataset/train", "LIGHTNING_CLOUD_PROJECT_ID"),
        ("/teamspace/lightning_storage/my_dataset", "LIGHTNING_CLOUD_PROJECT_ID"),
        ("/teamspace/studios/other_studio", "LIGHTNING_CLUSTER_ID"),
        ("/teamspace/datasets/imagenet", "LIGHTNING_CLUSTER_ID"),
    ],
)
def test_a_studio_path_outside_a_studio_names_the_variable_in_upstreams_words(
    monkeypatch: pytest.MonkeyPatch, path: str, variable: str
) -> None:
    for name in ("LIGHTNING_CLOUD_PROJECT_ID", "LIGHTNING_CLUSTER_ID", "LIGHTNING_CLOUD_SPACE_ID", "LITDATA_MOUNTS"):
        monkeypatch.delenv(name, raising=False)
    for error in (RuntimeError, ValueError):  # upstream's type and ours
        with pytest.raises(error, match=f"`{variable}` couldn't be found from the environment variables.") as e:
            resolve_dir(path)
        assert "LITDATA_MOUNTS" in str(e.value)  # and ours says how to read it anyway


def test_a_relative_path_and_a_time_template_resolve_as_upstreams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_dir("relative") == Dir(path=str(tmp_path / "relative"), url=None)
    now = datetime.datetime.now()
    assert resolve_dir("/logs/log_{%Y-%m}/important").path == f"/logs/log_{now.year}-{now.month:02d}/important"


# --- tests/streaming/test_item_loader.py -----------------------------------------------------


def test_compression_options_are_refused_in_upstreams_words(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="compression_level='batch'"):
        BinaryWriter(tmp_path, chunk_size=4, compression="zstd_framed")
    with pytest.raises(ValueError, match="zstd:4"):
        BinaryWriter(tmp_path, chunk_size=4, compression="zstd", compression_level=4)  # type: ignore[arg-type]


@pytest.mark.parametrize(("level", "framed"), [("chunk", False), ("batch", True), ("sample", False)])
def test_a_cache_takes_the_compression_level(tmp_path: Path, level: str, framed: bool) -> None:
    cache = Cache(str(tmp_path), chunk_size=10, compression="zstd", compression_level=level)
    for i in range(20):
        cache[i] = i
    cache.done()
    cache.merge()
    names = sorted(p.name for p in tmp_path.glob("chunk-*"))
    assert all(name.endswith(".zstd.bin") for name in names) == (level == "chunk")
    assert (tmp_path / names[0]).read_bytes().startswith(b"LDFZ01") == framed
    recorded = json.loads((tmp_path / "index.json").read_text())["config"].get("compression_level")
    assert recorded == (None if level == "chunk" else level)  # whole-file chunks need no mark: readers see .zstd.bin
    assert [StreamingDataset(str(tmp_path))[i] for i in range(20)] == list(range(20))


# --- tests/streaming/test_parquet.py ---------------------------------------------------------


def _parquet_folder(path: Path, files: int = 3, rows: int = 5) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir()
    for f in range(files):
        table = pa.table({"name": [f"n{f}-{r}" for r in range(rows)], "weight": [float(r) for r in range(rows)]})
        pq.write_table(table, path / f"tmp-{f}.parquet")
    return path


def test_a_parquet_folder_is_indexed_and_streamed_as_upstreams(tmp_path: Path) -> None:
    folder = _parquet_folder(tmp_path / "pq")
    index_parquet_dataset(str(folder))
    index = json.loads((folder / "index.json").read_text())
    assert index["config"]["item_loader"] == "ParquetLoader"
    assert [c["chunk_size"] for c in index["chunks"]] == [5, 5, 5]
    rows = list(StreamingDataset(str(folder)))
    assert len(rows) == 15 and rows[0] == {"name": "n0-0", "weight": 0.0}


def test_parquet_errors_carry_upstreams_words(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for error in (RuntimeError, FileNotFoundError):  # upstream's type and ours
        with pytest.raises(error, match="No Parquet files were found"):
            index_parquet_dataset(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="Invalid Hugging Face dataset URL"):
        index_hf_dataset("invalid_url")
    folder = _parquet_folder(tmp_path / "pq")
    for error in (AssertionError, FileNotFoundError):  # upstream's type and ours
        with pytest.raises(error, match="No chunks") as e:
            StreamingDataset(str(folder / "foo*.parquet"))
        assert "tmp-0.parquet" in str(e.value)  # ours says which files there are


@pytest.mark.parametrize("loader", [PyTreeLoader, PyTreeLoader(), TokensLoader(block_size=4)])
def test_a_loader_other_than_parquet_for_hf_is_refused_in_upstreams_words(loader: Any) -> None:
    # Refused before anything is fetched: no Hugging Face server is needed.
    with pytest.raises(ValueError, match="Invalid item_loader for hf://datasets.") as e:
        StreamingDataset("hf://datasets/some_org/some_repo/some_path", item_loader=loader)
    assert "ParquetLoader" in str(e.value) or "()" in str(e.value)


def test_a_loader_class_for_an_instance_is_named(tmp_path: Path) -> None:
    folder = _parquet_folder(tmp_path / "pq")
    with pytest.raises(ValueError, match=r"item_loader=ParquetLoader is a class; pass an instance: ParquetLoader\(\)"):
        StreamingDataset(str(folder), item_loader=ParquetLoader)  # type: ignore[arg-type]


# --- tests/processing/test_data_processor.py -------------------------------------------------

RUN: dict[str, Any] = {"num_workers": 1, "start_method": "fork", "verbose": False}


def count_up(index: int, shift: int = 2) -> Any:
    yield from range(index + shift)


def touch(index: int, output_dir: str) -> None:
    Path(output_dir, f"{index}.txt").write_text("hello")


def nothing(index: int) -> None:
    return None


def test_optimize_and_map_leave_upstreams_files(tmp_path: Path) -> None:
    optimize(count_up, [0, 1], str(tmp_path / "gen"), chunk_size=2, **RUN)  # 2 + 3 samples
    assert sorted(p.name for p in (tmp_path / "gen").iterdir()) == [
        "chunk-0-0.bin",
        "chunk-0-1.bin",
        "chunk-0-2.bin",
        "index.json",
    ]
    assert len(Cache(str(tmp_path / "gen"), chunk_size=1)) == 5
    optimize(nothing, [1, 2, 3], str(tmp_path / "empty"), chunk_bytes="64MB", **RUN)
    assert [p.name for p in (tmp_path / "empty").iterdir()] == ["index.json"]
    map(touch, list(range(3)), str(tmp_path / "mapped"), **RUN)
    assert sorted(p.name for p in (tmp_path / "mapped").iterdir()) == ["0.txt", "1.txt", "2.txt"]


def test_map_errors_carry_upstreams_words(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="The provided weights length should match the inputs' length."):
        map(touch, list(range(5)), str(tmp_path / "w"), reorder_files=True, weights=[1], **RUN)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.txt").write_text("kept")
    for error in (RuntimeError, ValueError):  # upstream's type and ours
        with pytest.raises(error, match="already contains data and datasets are meant to be immutable") as e:
            map(touch, [0, 1], str(tmp_path / "full"), error_when_not_empty=True, **RUN)
        assert "old.txt" in str(e.value)  # ours names what is there


# --- tests/utilities/test_train_test_split.py ------------------------------------------------


def _ints(path: Path, n: int, chunk_size: int) -> str:
    cache = Cache(str(path), chunk_size=chunk_size)
    for i in range(n):
        cache[i] = i
    cache.done()
    cache.merge()
    return str(path)


def test_splits_name_the_chunk_files_they_read(tmp_path: Path) -> None:
    dataset = StreamingDataset(_ints(tmp_path / "a", 22, 2))
    train, test = train_test_split(dataset, splits=[0.5, 0.5], shuffle=False)
    assert train.subsampled_files == [f"chunk-0-{i}.bin" for i in range(6)]  # chunk-0-10 last, not third
    assert test.subsampled_files == [f"chunk-0-{i}.bin" for i in range(5, 11)]  # chunk 5 is in both
    assert dataset.subsampled_files == [f"chunk-0-{i}.bin" for i in range(11)]
    shuffled = train_test_split(dataset, splits=[0.5, 0.5], shuffle=True)
    assert sorted(len(s) for s in shuffled) == [11, 11]
    subsampled = StreamingDataset(_ints(tmp_path / "b", 200, 10), subsample=0.25)
    with pytest.warns(UserWarning, match="leaves an empty split"):  # ours says so; upstream is silent
        assert [len(s) for s in train_test_split(subsampled, [0.01, 0.01, 0.98])] == [0, 0, 49]


# --- tests/raw/test_dataset.py, tests/raw/test_indexer.py, tests/streaming/test_raw_dataset.py -------


def test_raw_index_errors_carry_upstreams_words(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"file{i}.jpg").write_bytes(f"content{i}".encode())
    dataset = StreamingRawDataset(str(tmp_path), cache_files=False)
    assert dataset[0] == b"content0" and dataset.__getitems__([0, 2]) == [b"content0", b"content2"]
    with pytest.raises(IndexError, match="Index 5 out of range for dataset with length 3") as e:
        dataset[5]
    assert str(tmp_path) in str(e.value)  # ours names the dataset
    with pytest.raises(IndexError, match="out of range"):
        dataset.__getitems__([0, 5])


def test_a_cached_listing_of_another_folder_is_not_reused(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.jpg").write_bytes(b"x")
    cache = tmp_path / "cache"
    cache.mkdir()
    indexer = FileIndexer(extensions=[".jpg"])
    assert [Path(f.path).name for f in indexer.build_or_load_index(str(tmp_path / "a"), str(cache), {})] == ["a.jpg"]
    # The same cache folder for another dataset: its own files, not the listing cached for "a".
    assert [Path(f.path).name for f in indexer.build_or_load_index(str(tmp_path / "b"), str(cache), {})] == ["b.jpg"]
