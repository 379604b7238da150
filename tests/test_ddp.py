"""StreamingDataLoader under a real torch.distributed (gloo) job with several processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter

pytestmark = pytest.mark.distributed

WORKER = Path(__file__).with_name("ddp_worker.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dataset(path: Path, n: int) -> Path:
    writer = BinaryWriter(path, chunk_size=9)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.zeros(3)})
    writer.done()
    writer.merge()
    return path


def _run(world: int, *args: str) -> list[dict[str, Any]]:
    port = str(_free_port())
    procs = []
    for rank in range(world):
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
        }
        env["LOCAL_RANK"] = str(rank)
        procs.append(subprocess.Popen([sys.executable, str(WORKER), *args], env=env, stderr=subprocess.PIPE, text=True))
    errors = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            errors.append("timeout (a rank hung):\n" + err)
            continue
        if proc.returncode != 0:
            errors.append(err)
    assert not errors, "\n".join(errors)
    return json.loads(Path(args[1]).read_text())


def test_equal_batches_and_disjoint_samples(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "ds", 203)
    result = _run(2, str(data), str(tmp_path / "out.json"), "8", "1", "-1", "-", "-")
    assert result[0]["batches"] == result[1]["batches"] == 203 // 16
    seen = result[0]["seen"] + result[1]["seen"]
    assert len(seen) == len(set(seen)) == (203 // 16) * 16


def test_resume_on_another_world_size(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "ds", 240)
    state = tmp_path / "state.pkl"
    first = _run(2, str(data), str(tmp_path / "a.json"), "5", "2", "7", "-", str(state))
    second = _run(3, str(data), str(tmp_path / "b.json"), "5", "1", "-1", str(state), "-")
    before = [i for r in first for i in r["seen"]]
    after = [i for r in second for i in r["seen"]]
    assert len({r["batches"] for r in second}) == 1
    assert not set(before) & set(after)
    assert len(after) == len(set(after))
    # 240 - 70 consumed = 170 left; 3 ranks x 5 per batch keeps 165 of them.
    assert len(before) == 70 and len(after) == 165
