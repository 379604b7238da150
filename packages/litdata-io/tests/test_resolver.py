"""resolve_dir, Dir, time templates and cache folders."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from litdata_io import Dir, cache_dir_for, cache_root, resolve_dir
from litdata_io._resolver import expand_time_template


def test_local_paths_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_dir("data") == Dir(path=str(tmp_path / "data"), url=None)
    assert resolve_dir(tmp_path / "x") == Dir(path=str(tmp_path / "x"), url=None)
    assert resolve_dir("~/d").path == os.path.join(os.path.expanduser("~"), "d")
    assert resolve_dir(f"file://{tmp_path}/y") == Dir(path=str(tmp_path / "y"), url=None)
    assert resolve_dir(None) == Dir()


def test_network_drive_keeps_the_local_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_dir("local:/data/shared-drive/some-data") == Dir(path=None, url="local:/data/shared-drive/some-data")
    monkeypatch.chdir(tmp_path)
    assert resolve_dir("local:drive").url == f"local:{tmp_path / 'drive'}"
    assert resolve_dir("local:///mnt/x").url == "local:/mnt/x"


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("s3://my-bucket/my-data", "s3://my-bucket/my-data"),
        ("s3://my-bucket/my-data/", "s3://my-bucket/my-data"),
        ("S3://my-bucket", "s3://my-bucket"),
        ("gs://b/p", "gs://b/p"),
        ("gcs://b/p", "gs://b/p"),
        ("r2://bucket/fast_data", "r2://bucket/fast_data"),
        ("azure://my-container/fast_data", "azure://my-container/fast_data"),
        ("az://my-container/fast_data", "azure://my-container/fast_data"),
        ("hf://datasets/org/name/data", "hf://datasets/org/name/data"),
        ("https://example.com/data/", "https://example.com/data"),
        ("memory://somewhere/x", "memory://somewhere/x"),
    ],
)
def test_urls(given: str, url: str) -> None:
    assert resolve_dir(given) == Dir(path=None, url=url)


def test_dir_is_resolved_field_by_field(tmp_path: Path) -> None:
    assert resolve_dir(Dir(path=str(tmp_path / "cache"), url="s3://b/x/")) == Dir(str(tmp_path / "cache"), "s3://b/x")
    assert resolve_dir(Dir(url="az://c/p")) == Dir(None, "azure://c/p")
    assert resolve_dir(Dir(path=str(tmp_path))) == Dir(str(tmp_path), None)


def test_time_templates_expand() -> None:
    moment = datetime.datetime(2025, 5, 5, 13, 7)
    assert expand_time_template("s3://b/run_{%Y-%m-%d}", moment) == "s3://b/run_2025-05-05"
    assert expand_time_template("/x/{%H%M}/{%Y}", moment) == "/x/1307/2025"
    assert expand_time_template("/no/template/{name}", moment) == "/no/template/{name}"
    year = str(datetime.datetime.now().year)
    assert resolve_dir("s3://b/run_{%Y}").url == f"s3://b/run_{year}"
    assert resolve_dir("/tmp/run_{%Y}").path == f"/tmp/run_{year}"


@pytest.mark.parametrize(
    ("path", "instead"),
    [
        ("/teamspace/s3_connections/my-data-1/fast_data", "s3://"),
        ("/teamspace/gcs_connections/c/x", "gs://"),
        ("/teamspace/datasets/ds", "bucket URL"),
        ("/teamspace/lightning_storage/x/y", "r2://"),
    ],
)
def test_lightning_studio_paths_explain_what_to_pass(path: str, instead: str) -> None:
    with pytest.raises(ValueError, match="Lightning Studio") as info:
        resolve_dir(path)
    assert instead in str(info.value) and f"local:{path}" in str(info.value)


def test_this_studio_is_a_plain_folder() -> None:
    assert resolve_dir("/teamspace/studios/this_studio/data") == Dir("/teamspace/studios/this_studio/data", None)


@pytest.mark.parametrize(
    ("given", "match"),
    [("s3://", "no bucket"), ("gs:///x", "no bucket"), ("hf://org/name", "hf://datasets"), ("", "empty")],
)
def test_bad_locations(given: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        resolve_dir(given)


def test_wrong_type() -> None:
    with pytest.raises(TypeError, match="Dir"):
        resolve_dir(42)  # type: ignore[arg-type]


def test_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LITDATA_CACHE_DIR", raising=False)
    assert cache_root() == Path.home() / ".lightning" / "chunks"
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"


def test_each_dataset_gets_its_own_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path))
    first = cache_dir_for("s3://my-bucket/datasets/a")
    assert first.parent == tmp_path
    assert first.name.startswith("s3-my-bucket-datasets-a-")
    assert cache_dir_for("s3://my-bucket/datasets/a/") == first
    others = {
        cache_dir_for(url)
        for url in ("s3://my-bucket/datasets/b", "gs://my-bucket/datasets/a", "s3://my-bucket/datasets/a_")
    }
    assert first not in others and len(others) == 3
    assert cache_dir_for("s3://b/x", cache_dir=tmp_path / "elsewhere").parent == tmp_path / "elsewhere"
    assert not first.exists()  # computing the folder does not create it
    long = cache_dir_for("s3://bucket/" + "very-long-folder-name/" * 20 + "end")
    assert len(long.name) < 90 and long.name.endswith(long.name[-12:])
