"""StreamingDataLoader under a real torch.distributed (gloo) job with several processes.

Each rank is a process of its own, forked from the torch-preloaded test zygote (``tests/support/zygote.py``)
rather than a fresh interpreter: the ranks' torch import was most of this file's time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter
from tests.support.zygote import start_python

pytestmark = pytest.mark.distributed

WORKER = Path(__file__).parent / "scripts" / "ddp_rank.py"


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
        procs.append(start_python([str(WORKER), *args], env=env, cwd=Path.cwd()))
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


MATRIX_WORKER = Path(__file__).parent / "scripts" / "ddp_matrix_rank.py"


@pytest.fixture(scope="module")
def matrix_datasets(tmp_path_factory: pytest.TempPathFactory) -> list[list[Any]]:
    root = tmp_path_factory.mktemp("ddp_matrix")
    # (size, batch size, window shuffle): sizes that no world size, worker count and batch divide;
    # 37 is smaller than 4 ranks x 3 workers x 4 samples, so some workers get nothing at all.
    shapes = [(37, 4, False), (101, 3, True)]
    return [[str(_dataset(root / f"n{n}", n)), n, batch, window] for n, batch, window in shapes]


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_rank_gets_equal_batches_under_every_setting(
    tmp_path: Path, matrix_datasets: list[list[Any]], world: int
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"datasets": matrix_datasets, "workers": [0, 1, 2, 3]}))
    out = tmp_path / "out.json"
    records = _launch(MATRIX_WORKER, world, str(spec), str(out))
    assert len(records) == len(matrix_datasets) * 4 * 2
    for record in records:
        ranks = record["ranks"]
        size, batch, where = record["size"], record["batch_size"], {k: v for k, v in record.items() if k != "ranks"}
        seen = [i for rank in ranks for i in rank["seen"]]
        assert len(seen) == len(set(seen)), f"duplicates under {where}"
        assert all(rank["batches"] == rank["len"] for rank in ranks), f"len(loader) is off under {where}"
        counts = [rank["batches"] for rank in ranks]
        if record["drop_last"]:
            assert len(set(counts)) == 1, f"unequal batches {counts} under {where}"
            assert len(seen) == (size // (batch * world)) * batch * world, where
        else:
            assert sorted(seen) == list(range(size)), f"samples missing under {where}"
            assert max(counts) - min(counts) <= 1, f"batches {counts} under {where}"
            # Equal counts are possible (without repeating samples) unless the last round of
            # batches holds fewer samples than there are ranks; then they must be equal.
            rounds = -(-size // (batch * world))
            if size - (rounds - 1) * batch * world >= world:
                assert len(set(counts)) == 1, f"unequal batches {counts} under {where}"


def _launch(script: Path, world: int, *args: str) -> Any:
    port = str(_free_port())
    procs = []
    for rank in range(world):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "RANK": str(rank)}
        env |= {"WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)}
        procs.append(start_python([str(script), *args], env=env, cwd=Path.cwd(), start_new_session=True))
    errors = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            for other in procs:  # the whole session: forked DataLoader workers hold the pipe open too
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(other.pid, signal.SIGKILL)
            _, err = proc.communicate()
            errors.append("timeout (a rank hung):\n" + err)
            continue
        if proc.returncode != 0:
            errors.append(err)
    assert not errors, "\n".join(errors)
    return json.loads(Path(args[-1]).read_text())
