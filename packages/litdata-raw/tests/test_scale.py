"""Big listings: a folder of 50k files indexed with bounded memory, the compact file list, the streamed index."""

from __future__ import annotations

import json
import logging
import os
import pickle
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest
import zstandard
from torch.utils.data import DataLoader

from litdata_raw import FileIndexer, FileList, FileMetadata, StreamingRawDataset
from litdata_raw import _file_index as _index
from litdata_raw import _file_index_codec as _index_codec
from litdata_raw._file_index import decode_index, encode_index

FOLDERS, PER_FOLDER = 50, 1000
MiB = 1 << 20


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    for d in range(FOLDERS):
        folder = root / f"d{d:03d}"
        folder.mkdir()
        for i in range(PER_FOLDER):
            os.mknod(folder / f"f-{d * PER_FOLDER + i:06d}.bin")  # empty: one system call per file
    (root / "d000-x.bin").write_bytes(b"12345")  # sorts before d000/... ("-" < "/")
    (root / "d001" / "z.bin").write_bytes(b"abc")
    return root


def _expected(root: Path) -> list[tuple[str, int]]:
    found = [
        (os.path.join(folder, name), os.path.getsize(os.path.join(folder, name)))
        for folder, _, names in os.walk(root)
        for name in names
        if name != _index.INDEX_FILENAME
    ]
    return sorted(found)


def test_big_folder_is_indexed_with_bounded_memory(big_folder: Path, tmp_path: Path) -> None:
    """50k files: listed exactly, in path order, and never held as one object (or dict) per file.

    Before the compact list, building this index peaked at ~500 bytes per file (an ObjectInfo, a
    FileMetadata, a dict and the whole JSON text each) and kept ~180 per file; now the list keeps
    ~40 (the path after the folder, 8 bytes of offsets and 8 of size), and what is made on the
    way is a page of the listing and a block of entries: a few MiB whatever the number of files.
    """
    count = FOLDERS * PER_FOLDER + 2
    tracemalloc.start()
    try:
        files = FileIndexer().build_or_load_index(str(big_folder), str(tmp_path / "cache"), None)
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        reloaded = FileIndexer().build_or_load_index(str(big_folder), str(tmp_path / "cache"), None)
        reload_peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert isinstance(files, FileList) and len(files) == count
    assert [(f.path, f.size) for f in files] == _expected(big_folder)
    assert reloaded == files
    assert kept < 64 * count
    assert files.nbytes() < 48 * count
    assert peak - kept < 8 * MiB  # transient: a page, a block and the arrays' assembly
    assert reload_peak < 64 * count + 8 * MiB


def test_forked_workers_and_setup_overrides_use_the_list(big_folder: Path, tmp_path: Path) -> None:
    class Small(StreamingRawDataset):
        def setup(self, files: Sequence[FileMetadata]) -> list[list[FileMetadata]]:
            # What overrides written for upstream do: comprehensions, filters, groups of lists.
            kept = [f for f in files if f.size > 0 or f.path.endswith("7.bin")]
            return [kept[i : i + 2] for i in range(0, len(kept), 2)]

    ds = Small(big_folder, cache_dir=tmp_path / "cache")
    assert isinstance(ds.files, FileList)
    assert len(ds) == (FOLDERS * PER_FOLDER // 10 + 2) // 2
    loader = DataLoader(ds, batch_size=64, num_workers=2, collate_fn=lambda batch: batch)
    samples = [sample for batch in loader for sample in batch]
    assert len(samples) == len(ds) and samples[0] == [b"12345", b""]


def test_file_list_acts_like_a_list() -> None:
    metas = [FileMetadata(f"s3://b/x/{i:03d}-é.bin", i * 7) for i in range(300)]
    files = FileList.from_files(metas)
    assert len(files) == 300 and files[0] == metas[0] and files[-1] == metas[-1]
    assert files == metas and metas == files and list(files) == metas
    assert files[10:20] == metas[10:20] and isinstance(files[10:20], FileList)
    assert files[::-3] == metas[::-3] and files[5:2] == []
    assert files + metas[:2] == [*metas, *metas[:2]] and metas[:1] + files == [metas[0], *metas]
    assert pickle.loads(pickle.dumps(files[100:110])) == metas[100:110]
    assert sorted(files, key=lambda f: -f.size)[0] == metas[-1]
    assert files.copy() == metas and isinstance(files.copy(), list)
    assert files.index(metas[5]) == 5 and metas[7] in files
    assert files.sizes.tolist() == [m.size for m in metas]
    with pytest.raises(IndexError, match="300"):
        files[300]
    with pytest.raises(AttributeError, match="read-only"):
        files.sort()  # pyright: ignore[reportAttributeAccessIssue] - what list code may call
    mixed = FileList.from_files([FileMetadata("/a/b/c", 1), FileMetadata("/a/bc", 2), FileMetadata("s3://z", 3)])
    assert [f.path for f in mixed] == ["/a/b/c", "/a/bc", "s3://z"]


def test_index_is_read_in_pieces_whatever_its_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other writers' key order, white space and escapes; values cut across the reader's reads."""
    entries = [{"size": i * 10**12, "path": f'/d/{i}-\u00e9"\\\U0001f600.bin'} for i in range(50)]
    entries[20]["path"] += '}, {"path": "x", "size": 1}'  # a "}," inside a path: not an entry's end
    text = json.dumps({"created_at": 1.5, "extra": {"files": [1]}, "files": entries, "source": "/d"}, indent=2)
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(text.encode())  # no content size
    for read_size in (7, 300, 1 << 20):  # values cut by every read; a few entries per read; all in one
        monkeypatch.setattr(_index_codec, "_READ", read_size)
        files = decode_index(frame, "x")
        assert [(f.path, f.size) for f in files] == [(e["path"], e["size"]) for e in entries]
        assert decode_index(encode_index(files, "/d"), "y") == files
    for bad in (b"not zstd", zstandard.ZstdCompressor().compress(b'{"source": "/d"}')):
        with pytest.raises(ValueError, match="not a valid index.json.zstd"):
            decode_index(bad, "bad-index")
    truncated = zstandard.ZstdCompressor().compress(text[:-40].encode())
    with pytest.raises(ValueError, match="bad-index"):
        decode_index(truncated, "bad-index")


def test_written_index_records_its_content_size() -> None:
    # Upstream reads the index with python-zstd's one-shot decompress, which needs the size.
    data = encode_index([FileMetadata("/d/a", 1)], "/d")
    params = zstandard.get_frame_parameters(data)
    assert params.content_size == len(zstandard.ZstdDecompressor().decompress(data))
    payload = json.loads(zstandard.ZstdDecompressor().decompress(data))
    assert payload["files"] == [{"path": "/d/a", "size": 1}] and payload["source"] == "/d"
    assert list(payload) == ["source", "files", "created_at"]


def test_long_listing_logs_its_progress(
    big_folder: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_index, "_PROGRESS_EVERY", 0.0)  # every page
    with caplog.at_level(logging.INFO, logger="litdata_raw"):
        FileIndexer(extensions=[".bin"]).discover_files(str(big_folder), None)
    lines = [r.getMessage() for r in caplog.records if r.name == "litdata_raw"]
    assert f"listed 1,000 files of {big_folder} so far" in lines[0]
    assert any(f"listed 50,002 files of {big_folder} in" in line for line in lines)
    assert len(lines) == 52  # one per page of 1,000 and the total


def test_a_custom_indexer_may_return_a_list(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(b"a")

    class Listed(FileIndexer):
        def discover_files(self, input_dir: str, storage_options: object) -> list[FileMetadata]:  # type: ignore[override]
            return [FileMetadata(os.path.join(input_dir, "a.bin"), 1)]

    ds = StreamingRawDataset(tmp_path / "data", cache_dir=tmp_path / "cache", indexer=Listed())
    assert isinstance(ds.files, FileList) and ds[0] == b"a"
