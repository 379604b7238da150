"""StreamingRawDataset over a local folder: samples, index caching, grouping, errors."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from litdata_raw import FileIndexer, FileMetadata, StreamingRawDataset
from litdata_raw._file_index import INDEX_FILENAME, decode_index


def _jpeg(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "nested" / "deeper").mkdir(parents=True)
    (root / "a.bin").write_bytes(b"\x00\x01\x02")
    (root / "b.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (root / "nested" / "c.jpg").write_bytes(_jpeg((255, 0, 0)))
    (root / "nested" / "deeper" / "d.txt").write_text("hello")
    return root


def test_bytes_round_trip(folder: Path, tmp_path: Path) -> None:
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache")
    assert len(ds) == 4
    by_name = {Path(f.path).name: i for i, f in enumerate(ds.files)}
    assert ds[by_name["a.bin"]] == b"\x00\x01\x02"
    lines = [json.loads(line) for line in ds[by_name["b.jsonl"]].splitlines()]
    assert lines == [{"x": 1}, {"x": 2}]
    image = Image.open(io.BytesIO(ds[by_name["c.jpg"]]))
    assert image.size == (4, 4)
    assert ds[by_name["d.txt"]] == b"hello"
    assert {f.size for f in ds.files} == {len(ds[i]) for i in range(len(ds))}


def test_getitems_keeps_the_order_asked(folder: Path, tmp_path: Path) -> None:
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache")
    order = [3, 0, 2, 1, 0]
    assert ds.__getitems__(order) == [ds[i] for i in order]
    with pytest.raises(IndexError, match="out of range"):
        ds.__getitems__([0, 4])
    with pytest.raises(IndexError, match="out of range"):
        ds[-1]


def test_index_is_cached_and_reused(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = StreamingRawDataset(folder, cache_dir=cache)
    index_file = Path(first.cache_dir) / INDEX_FILENAME
    assert index_file.is_file()
    assert decode_index(index_file.read_bytes(), "x") == first.files
    assert not (folder / INDEX_FILENAME).exists()  # the data folder is left alone

    (folder / "a.bin").unlink()
    (folder / "new.bin").write_bytes(b"new")
    again = StreamingRawDataset(folder, cache_dir=cache)
    assert again.files == first.files  # the listing was not redone
    gone = next(i for i, f in enumerate(again.files) if f.path.endswith("a.bin"))
    with pytest.raises(FileNotFoundError, match="recompute_index=True"):
        again[gone]

    fresh = StreamingRawDataset(folder, cache_dir=cache, recompute_index=True)
    assert sorted(Path(f.path).name for f in fresh.files) == ["b.jsonl", "c.jpg", "d.txt", "new.bin"]
    assert StreamingRawDataset(folder, cache_dir=cache).files == fresh.files


def test_corrupt_cached_index_is_rebuilt(folder: Path, tmp_path: Path) -> None:
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache")
    (Path(ds.cache_dir) / INDEX_FILENAME).write_bytes(b"not zstd")
    assert StreamingRawDataset(folder, cache_dir=tmp_path / "cache").files == ds.files


def test_indexer_extensions_and_depth(folder: Path, tmp_path: Path) -> None:
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "c1", indexer=FileIndexer(extensions=[".JPG", "bin"]))
    assert sorted(Path(f.path).name for f in ds.files) == ["a.bin", "c.jpg"]
    shallow = StreamingRawDataset(folder, cache_dir=tmp_path / "c2", indexer=FileIndexer(max_depth=2))
    assert "d.txt" not in {Path(f.path).name for f in shallow.files}


def test_transform_and_dataloader_with_workers(folder: Path, tmp_path: Path) -> None:
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache", transform=len)
    loader = DataLoader(ds, batch_size=3, num_workers=2)
    sizes = torch.cat(list(loader)).tolist()
    assert sizes == [f.size for f in ds.files]


def _refuses_jsonl(data: bytes) -> int:
    if data.startswith(b'{"x"'):
        raise ValueError("no JSON lines here")
    return len(data)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_transform_error_keeps_its_type_and_names_the_file(folder: Path, tmp_path: Path, num_workers: int) -> None:
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache", transform=_refuses_jsonl)
    index = next(i for i, f in enumerate(ds.files) if f.path.endswith("b.jsonl"))
    where = rf"transform failed on sample {index} \(.*b\.jsonl\)"
    with pytest.raises(ValueError, match=rf"^no JSON lines here\n{where}$"):
        ds[index]
    with pytest.raises(ValueError, match=rf"(?s)no JSON lines here\n{where}"):
        list(DataLoader(ds, batch_size=2, num_workers=num_workers))


def test_pickles_for_spawned_workers(folder: Path, tmp_path: Path) -> None:
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache")
    clone = pickle.loads(pickle.dumps(ds))
    assert clone.__getitems__([0, 1]) == ds.__getitems__([0, 1])


def test_item_type_path(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cache_files=True"):
        StreamingRawDataset(folder, cache_dir=tmp_path / "cache", item_type="path")
    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache", item_type="path", cache_files=True)
    assert ds[0] == ds.files[0].path and Path(ds[0]).is_file()


class Pairs(StreamingRawDataset):
    def setup(self, files: list[FileMetadata]) -> list[list[FileMetadata]]:
        ordered = sorted(files, key=lambda f: f.path)
        return [ordered[i : i + 2] for i in range(0, len(ordered) - 1, 2)]


def test_setup_groups_files(folder: Path, tmp_path: Path) -> None:
    ds = Pairs(folder, cache_dir=tmp_path / "cache")
    assert len(ds) == 2
    first = ds[0]
    assert isinstance(first, list) and len(first) == 2 and first[0] == b"\x00\x01\x02"


class Broken(StreamingRawDataset):
    def setup(self, files: list[FileMetadata]) -> list[FileMetadata]:
        return tuple(files)  # type: ignore[return-value]


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        StreamingRawDataset(tmp_path / "missing", cache_dir=tmp_path / "cache")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No files found"):
        StreamingRawDataset(tmp_path / "empty", cache_dir=tmp_path / "cache")
    (tmp_path / "file.bin").write_bytes(b"x")
    with pytest.raises(NotADirectoryError):
        StreamingRawDataset(tmp_path / "file.bin", cache_dir=tmp_path / "cache")
    (tmp_path / "empty" / "x.bin").write_bytes(b"x")
    with pytest.raises(TypeError, match="setup"):
        Broken(tmp_path / "empty", cache_dir=tmp_path / "cache")
    with pytest.raises(ValueError, match="item_type"):
        StreamingRawDataset(tmp_path / "empty", item_type="text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrent_downloads"):
        StreamingRawDataset(tmp_path / "empty", max_concurrent_downloads=0)


def test_distributed_sampler_splits_the_indices(folder: Path, tmp_path: Path) -> None:
    from torch.utils.data.distributed import DistributedSampler

    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache", transform=len)
    seen = []
    for rank in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=False)
        seen += torch.cat(list(DataLoader(ds, batch_size=2, sampler=sampler))).tolist()
    assert sorted(seen) == sorted(f.size for f in ds.files)


def test_indexing_from_inside_a_running_loop(folder: Path, tmp_path: Path) -> None:
    import asyncio

    ds = StreamingRawDataset(folder, cache_dir=tmp_path / "cache")

    async def main() -> bytes:
        return ds[0]

    assert asyncio.run(main()) == ds[0]


_LOOP_SCRIPT = """
import asyncio, sys
from litdata_io.internal import run_sync
from litdata_raw import StreamingRawDataset

ds = StreamingRawDataset(sys.argv[1])
assert ds[0] == b"a" and ds.__getitems__([0, 1]) == [b"a", b"b"]

async def loop_module():
    return type(asyncio.get_running_loop()).__module__

print(run_sync(loop_module()))  # the loop the dataset's downloads ran on
"""


def test_downloads_run_on_uvloop_when_installed(tmp_path: Path) -> None:
    """As upstream's docs say: StreamingRawDataset uses uvloop when it is installed (a fresh process)."""
    pytest.importorskip("uvloop")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "0.bin").write_bytes(b"a")
    (tmp_path / "data" / "1.bin").write_bytes(b"b")
    out = subprocess.run(
        [sys.executable, "-c", _LOOP_SCRIPT, str(tmp_path / "data")], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("uvloop"), out.stdout
