"""Two simulated nodes (two processes with node environment variables) make one dataset.

Each node processes its share of the inputs with its own workers and publishes its part of the
index to the output; the last node waits for the others, merges and writes index.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litdata_format import checksum_file, load_index
from litdata_stream import StreamingDataset
from tests.support.servers import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

SCRIPT = """
import json, sys
from litdata_prep import map, optimize

def fn(i):
    return {"i": i, "node_input": i}

def key(sample):
    return f"k{sample['i']}"

def touch(i, output_dir):
    import os
    open(os.path.join(output_dir, f"{i}.txt"), "w").write(os.environ["DATA_OPTIMIZER_NODE_RANK"])

if __name__ == "__main__":
    out, options = sys.argv[1], json.loads(sys.argv[2])
    optimize(fn, list(range(101)), out + "/data", chunk_size=6, num_workers=2, num_nodes=2, verbose=False,
             storage_options=options, keep_data_ordered=sys.argv[3] == "ordered", key_fn=key)
    map(touch, list(range(20)), out + "/files", num_workers=2, verbose=False, storage_options=options)
"""


def _run_nodes(tmp_path: Path, out: str, options: dict[str, Any], mode: str) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    procs = []
    for rank in (1, 0):  # the merging node starts first and must wait for the other
        env = {**os.environ, "DATA_OPTIMIZER_NUM_NODES": "2", "DATA_OPTIMIZER_NODE_RANK": str(rank)}
        command = [sys.executable, str(script), out, json.dumps(options), mode]
        procs.append(subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True))
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


@pytest.mark.parametrize("mode", ["shared", "ordered"])
def test_two_nodes_on_a_shared_folder(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "out"
    _run_nodes(tmp_path, str(out), {}, mode)
    ds = StreamingDataset(str(out / "data"), verify_chunks=True)
    assert sorted(s["i"] for s in ds) == list(range(101))
    # The merged index keeps every node's and worker's checksums, and they match the files.
    chunks = load_index(out / "data").chunks
    assert all(info.extra["checksum"] == checksum_file(out / "data" / info.filename) for info in chunks)
    names = {p.name for p in (out / "data").iterdir()}
    assert "index.json" in names and not any(n.endswith("-index.json") for n in names)
    ranks = {n.split("-")[1] for n in names if n.startswith("chunk-")}
    assert ranks & {"0", "1"} and ranks & {"2", "3"} and ranks <= {"0", "1", "2", "3"}  # both nodes wrote
    if mode == "ordered":
        assert [s["i"] for s in ds] == list(range(101))
    # The last node wrote one key index for both nodes' samples.
    assert [ds[f"k{i}"]["i"] for i in (0, 57, 100, 13)] == [0, 57, 100, 13]
    written = {p.name: p.read_text() for p in (out / "files").iterdir()}
    assert sorted(written) == sorted(f"{i}.txt" for i in range(20))
    assert set(written.values()) == {"0", "1"}


@pytest.mark.cloud
def test_two_nodes_into_s3(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    options = s3_server.storage_options()
    _run_nodes(tmp_path, f"s3://{s3_bucket}/job", options, "shared")
    ds = StreamingDataset(f"s3://{s3_bucket}/job/data", storage_options=options, cache_dir=str(tmp_path / "cache"))
    assert sorted(s["i"] for s in ds) == list(range(101))
    assert [ds[f"k{i}"]["i"] for i in (100, 0, 64)] == [100, 0, 64]  # the key index, read from the bucket
