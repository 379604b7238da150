"""Lightning's ``Trainer.fit(ckpt_path=...)`` from a mid-epoch checkpoint reads every sample exactly once.

The real lightning package runs ``tests/scripts/lightning_fit.py``: a first fit stops at step ``STOP``
and saves a checkpoint there, a second resumes from it. Lightning restores how many batches it
had fetched and counts them against ``len(loader)``, so ``len()`` must stay the whole epoch's
after ``load_state_dict`` (as upstream's and torchdata's loaders count it). With ``devices=2``
Lightning's own launcher starts the second rank (a fresh interpreter running the script again)
and gloo ties the ranks' steps together.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter
from tests.support.zygote import run_python

WORKER = Path(__file__).parent / "scripts" / "lightning_fit.py"


def _dataset(path: Path, n: int) -> str:
    writer = BinaryWriter(path, chunk_size=5)
    for i in range(n):
        writer.add_item(i, {"index": i, "x": torch.zeros(3)})
    writer.done()
    writer.merge()
    return str(path)


def _fit(data: str, out: Path, phase: str, devices: int, build: str, stop: int) -> list[dict[str, Any]]:
    env = dict(os.environ)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GLOBAL_RANK", "MASTER_PORT"):
        env.pop(name, None)
    args = [str(WORKER), data, str(out), phase, str(devices), build, str(stop)]
    done = run_python(args, env=env, cwd=out, timeout=300, preload=("lightning",))
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((out / f"{phase}-{rank}.json").read_text()) for rank in range(devices)]


def _resume(tmp_path: Path, samples: int, devices: int, build: str, stop: int) -> None:
    data = _dataset(tmp_path / "data", samples)
    out = tmp_path / "run"
    out.mkdir()
    first = _fit(data, out, "first", devices, build, stop)
    second = _fit(data, out, "resume", devices, build, stop)
    batches = samples // (3 * devices)
    for before, after in zip(first, second):
        assert len(before["seen"]) == stop * 3
        assert after["len"] == batches  # the whole epoch, as Lightning counts it
        assert len(after["seen"]) == (batches - stop) * 3  # the rest of it, nothing more or less
    seen = [i for rank in first + second for i in rank["seen"]]
    assert sorted(seen) == list(range(samples))


def test_mid_epoch_resume_on_one_device(tmp_path: Path) -> None:
    _resume(tmp_path, 48, 1, "datamodule", 5)


@pytest.mark.distributed
def test_mid_epoch_resume_under_ddp_with_the_loader_built_before_fit(tmp_path: Path) -> None:
    # The loader is made before the Trainer: rank 0 saw a world of one then, and its first len()
    # (in fit, after torch.distributed is set up) splits the epoch over the two ranks instead.
    _resume(tmp_path, 48, 2, "script", 3)
