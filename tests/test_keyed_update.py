"""build_keys_index and dataset_update (upstream 0.2.76's names and meaning), checked against upstream itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import litdata
from litdata.streaming.dataset_update import dataset_update
from litdata.utilities.keys_index import build_keys_index
from litdata_format import BinaryWriter, DatasetReader, load_index
from litdata_stream import StreamingDataset
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]

UPSTREAM_BUILDS = """
import pickle, sys
from litdata import build_keys_index
build_keys_index(sys.argv[2], lambda s: s["name"], verbose=False, num_shards=int(sys.argv[3]))
with open(sys.argv[1], "wb") as f:
    pickle.dump(None, f)
"""

UPSTREAM_READS = """
import json, pickle, sys
import numpy as np
from litdata import StreamingDataset
ds = StreamingDataset(sys.argv[2])
keys = json.loads(sys.argv[3])

def plain(value):
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value

with open(sys.argv[1], "wb") as f:
    pickle.dump(([plain(ds[i]) for i in range(len(ds))], [plain(ds[k]) for k in keys]), f)
"""


def _record(i: int) -> dict[str, Any]:
    return {"name": f"item-{i}", "value": i * 3, "tags": ["t"] * (i % 3)}


def _arrays(i: int) -> dict[str, Any]:
    return {"name": f"item-{i}", "vec": np.arange(4, dtype=np.int64) + i}


def _write(path: Path, make: Any, n: int = 30, **options: Any) -> None:
    writer = BinaryWriter(path, chunk_size=7, **options)
    for i in range(n):
        writer.add_item(i, make(i))
    writer.done()
    writer.merge()


def _key_table(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for shard in sorted((path / "keys").glob("shard-*.parquet")):
        rows += [{"shard": shard.name, **row} for row in pq.read_table(shard).to_pylist()]
    return rows


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


@pytest.mark.parametrize("num_shards", [1, 3])
def test_build_keys_index_writes_what_upstreams_writes(tmp_path: Path, num_shards: int) -> None:
    _write(tmp_path / "ours", _record)
    shutil.copytree(tmp_path / "ours", tmp_path / "theirs")
    assert litdata.build_keys_index is build_keys_index
    where = build_keys_index(tmp_path / "ours", lambda s: s["name"], verbose=False, num_shards=num_shards)
    assert where == str(tmp_path / "ours" / "keys")
    run_upstream(UPSTREAM_BUILDS, str(tmp_path / "theirs"), str(num_shards))
    # The same shards holding the same rows (key, index, chunk_index, chunk_offset), sorted by key.
    assert _key_table(tmp_path / "ours") == _key_table(tmp_path / "theirs")
    ours = json.loads((tmp_path / "ours" / "index.json").read_text())
    theirs = json.loads((tmp_path / "theirs" / "index.json").read_text())
    assert (
        ours["keys"]
        == theirs["keys"]
        == {
            "version": 1,
            "num_shards": num_shards,
            "sharding": "hash" if num_shards > 1 else "none",
        }
    )
    assert ours["chunks"] == theirs["chunks"]  # the chunk entries (checksums too) are kept as they were
    assert StreamingDataset(str(tmp_path / "ours"))["item-17"] == _record(17)
    _, looked_up = run_upstream(UPSTREAM_READS, str(tmp_path / "ours"), json.dumps(["item-17", "item-3"]))
    assert looked_up == [_record(17), _record(3)]


def test_build_keys_index_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    _write(tmp_path / "ds", _record)
    build_keys_index(tmp_path / "ds", lambda s: s["name"], verbose=False)
    with pytest.raises(FileExistsError, match="already has a key index; pass overwrite=True"):
        build_keys_index(tmp_path / "ds", lambda s: s["value"], verbose=False)
    build_keys_index(tmp_path / "ds", lambda s: s["value"], verbose=False, overwrite=True)
    assert StreamingDataset(str(tmp_path / "ds")).get_by_key(21) == _record(7)
    with pytest.raises(ValueError, match="key_fn returned the key 'same' for samples 0 and 1"):
        build_keys_index(tmp_path / "ds", lambda s: "same", verbose=False, overwrite=True)
    with pytest.raises(TypeError, match="key_fn on sample 0 returned a list"):
        build_keys_index(tmp_path / "ds", lambda s: s["tags"], verbose=False, overwrite=True)
    with pytest.raises(FileNotFoundError, match="has no index.json"):
        build_keys_index(tmp_path / "nothing", lambda s: s["name"], verbose=False)
    with pytest.raises(ValueError, match="not a local folder"):
        build_keys_index("s3://bucket/ds", lambda s: s["name"], verbose=False)
    assert StreamingDataset(str(tmp_path / "ds")).get_by_key(21) == _record(7)  # failed runs changed nothing


@pytest.mark.parametrize(
    ("make", "options"),
    [
        (_record, {}),  # Arrow rows
        (_record, {"compression": "zstd"}),  # Arrow rows, IPC zstd
        (_arrays, {"compression": "zstd"}),  # PyTree items, whole-file zstd
        (_arrays, {"compression": "zstd", "compression_level": "batch"}),  # framed zstd
    ],
    ids=["rows", "rows-zstd", "arrays-zstd", "arrays-framed"],
)
def test_dataset_update_replaces_samples_by_key(tmp_path: Path, make: Any, options: dict[str, Any]) -> None:
    out = tmp_path / "ds"
    _write(out, make, **options)
    build_keys_index(out, lambda s: s["name"], verbose=False)
    before = load_index(out)
    new = {"item-3": make(103), "item-20": make(120)}
    new["item-3"]["name"], new["item-20"]["name"] = "item-3", "item-20"
    with dataset_update(str(out)) as update:
        update["item-3"] = new["item-3"]
        update.replace("item-20", new["item-20"])
        update.commit()
        with pytest.raises(RuntimeError, match="committed"):
            update["item-4"] = make(4)
    expected = [new.get(f"item-{i}", make(i)) for i in range(30)]
    reader = DatasetReader(out)
    assert [_plain(reader[i]) for i in range(30)] == [_plain(s) for s in expected]
    after = load_index(out)
    changed = [a.filename for a, b in zip(after.chunks, before.chunks) if a.to_json() != b.to_json()]
    assert changed == [before.chunks[0].filename, before.chunks[2].filename]  # only the chunks holding them
    assert after.config == before.config
    assert not list(out.glob(".litdata-update-*"))
    everything, looked_up = run_upstream(UPSTREAM_READS, str(out), json.dumps(["item-20"]))
    assert everything == [_plain(s) for s in expected] and looked_up == [_plain(new["item-20"])]


def test_dataset_update_changes_nothing_unless_committed_and_valid(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    _write(out, _arrays)
    with pytest.raises(FileNotFoundError, match="has no key index"):
        dataset_update(out)
    build_keys_index(out, lambda s: s["name"], verbose=False)
    snapshot = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with dataset_update(out) as update:
        update["item-1"] = _arrays(50)  # never committed
    with dataset_update(out) as update, pytest.raises(KeyError, match="unknown key 'item-99'"):
        update["item-1"] = _arrays(50)
        update["item-99"] = _arrays(99)
        update.commit()
    with (
        dataset_update(out) as update,
        pytest.raises(ValueError, match="key 'item-1' cannot be stored like the other samples of chunk-0-0.bin"),
    ):
        update["item-1"] = {"name": "item-1", "vec": "not an array"}
        update.commit()
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == snapshot
    assert not list(out.glob(".litdata-update-*"))
