"""``index.json.zstd`` moves both ways between litdata_raw and upstream LitData."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from litdata_raw import FileList, FileMetadata, StreamingRawDataset
from litdata_raw._file_index import INDEX_FILENAME, decode_index, encode_index
from tests.support.upstream_venv import run_upstream

pytestmark = pytest.mark.compat

SCRIPT = """
import pickle, sys
from litdata.raw.indexer import FileIndexer, FileMetadata
indexer = FileIndexer()
ours = indexer._load_index_file(sys.argv[2])
indexer._save_index_file(sys.argv[3], [FileMetadata(path="/data/x.jpg", size=7)], "/data")
pickle.dump([m.to_dict() for m in ours], open(sys.argv[1], "wb"))
"""


def test_index_file_both_ways(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(b"abc")
    ds = StreamingRawDataset(tmp_path / "data", cache_dir=tmp_path / "cache")
    theirs = tmp_path / "theirs" / INDEX_FILENAME
    read_by_upstream = run_upstream(SCRIPT, str(Path(ds.cache_dir) / INDEX_FILENAME), str(theirs))
    assert read_by_upstream == [f.to_dict() for f in ds.files]
    assert decode_index(theirs.read_bytes(), str(theirs)) == [FileMetadata("/data/x.jpg", 7)]


BIG_SCRIPT = """
import hashlib, json, pickle, sys
from litdata.raw.indexer import FileIndexer, FileMetadata
indexer = FileIndexer()
ours = indexer._load_index_file(sys.argv[2])
digest = hashlib.sha256(json.dumps([m.to_dict() for m in ours]).encode()).hexdigest()
files = [FileMetadata(path=f"s3://b/up/{i:06d}-\\u00e9.bin", size=i * 3) for i in range(int(sys.argv[4]))]
indexer._save_index_file(sys.argv[3], files, "s3://b/up")
pickle.dump({"count": len(ours), "digest": digest}, open(sys.argv[1], "wb"))
"""


def test_big_index_both_ways(tmp_path: Path) -> None:
    count = 50_000
    # Non-ASCII, a quote and a backslash (escaped in the JSON), sizes past 2**32, several folders.
    files = [FileMetadata(f's3://b/files/d{i % 7}/{i:06d}-\u00e9"\\.bin', i * 1_000_003) for i in range(count)]
    ours = tmp_path / "ours" / INDEX_FILENAME
    ours.parent.mkdir()
    ours.write_bytes(encode_index(FileList.from_files(files), "s3://b/files"))  # streamed, with its content size
    theirs = tmp_path / "theirs" / INDEX_FILENAME
    read_by_upstream = run_upstream(BIG_SCRIPT, str(ours), str(theirs), str(count))
    expected = hashlib.sha256(json.dumps([f.to_dict() for f in files]).encode()).hexdigest()
    assert read_by_upstream == {"count": count, "digest": expected}
    read_by_us = decode_index(theirs.read_bytes(), str(theirs))
    assert isinstance(read_by_us, FileList)
    assert read_by_us == [FileMetadata(f"s3://b/up/{i:06d}-\u00e9.bin", i * 3) for i in range(count)]
