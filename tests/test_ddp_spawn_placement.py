"""A DDP job started with ``torch.multiprocessing.spawn`` (Lightning's ``ddp_spawn``) has no per-worker helper.

Each rank is a multiprocessing child, which the old rule (in-process obstore in any
multiprocessing child) took for a worker: the rank ran obstore itself, and each DataLoader
worker it forked then needed an obstore helper of its own. Placement is declared now: the rank is
a root (one helper), its workers run obstore. The job runs as a real root process
(``tests/scripts/ddp_spawn.py``, forked from the test zygote: see ``tests/support/zygote.py``); no test
waits on a clock: a hang fails on pytest's timeout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter
from litdata_io import get_storage
from tests.support.servers import S3Server, free_port
from tests.support.zygote import start_python

pytestmark = [pytest.mark.cloud, pytest.mark.distributed]

ROOT = Path(__file__).resolve().parents[1]
N = 40


@pytest.mark.timeout(900)
def test_ranks_started_by_torch_spawn_keep_one_helper_and_their_workers_run_obstore(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    url, options = f"s3://{s3_bucket}/data", s3_server.storage_options()
    writer = BinaryWriter(tmp_path / "local", chunk_size=4)
    for i in range(N):
        writer.add_item(i, {"index": i})
    writer.done()
    writer.merge()
    storage = get_storage(url, options)
    for path in sorted((tmp_path / "local").iterdir()):
        storage.upload(path, path.name)
    spec = {"url": url, "options": options, "scratch": str(tmp_path / "scratch"), "port": free_port()}
    # The job's root: its import lines load torch, so it is forked from the test zygote (tests/support/zygote.py);
    # its ranks are what torch.multiprocessing.spawn starts, fresh interpreters.
    proc = start_python(["-m", "tests.scripts.ddp_spawn", json.dumps(spec)], env=dict(os.environ), cwd=ROOT)
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stdout + stderr[-6000:]
    ranks: list[dict[str, Any]] = json.loads(stdout.splitlines()[-1])
    for rank in ranks:
        # The rank is a root: index.json went through its helper, and obstore stayed out of its memory.
        assert (rank["placement"], rank["obstore_loaded"]) == ("helper", False), rank
        assert rank["placements"] == ["here"], rank  # every worker of both epochs ran obstore itself
        # Exactly three children (its helper and its two workers), and none of them has a child.
        tree, workers = rank["snapshot"]["tree"], rank["snapshot"]["workers"]
        assert tree["pid"] == rank["pid"]
        kids = {child["pid"]: child["children"] for child in tree["children"]}
        assert sorted(kids) == sorted([rank["helper"], *workers]), tree
        assert all(grandchildren == [] for grandchildren in kids.values()), tree
    for epoch in range(2):
        read = [i for rank in ranks for i in rank["epochs"][epoch]]
        assert sorted(read) == list(range(N)), f"epoch {epoch}: every sample once across the ranks"
