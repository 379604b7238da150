"""``index.json.zstd`` moves both ways between litdata_raw and upstream LitData."""

from __future__ import annotations

from pathlib import Path

import pytest

from litdata_raw import FileMetadata, StreamingRawDataset
from litdata_raw._index import INDEX_FILENAME, decode_index
from tests.upstream_venv import run_upstream

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
