"""The worker processes' start and end: first batches handed over at start, results published while they exit."""

from __future__ import annotations

import importlib
import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

from litdata_format import DatasetReader
from litdata_prep import optimize
from litdata_prep._output_lock import OutputLockLostError

fns: Any = importlib.import_module("prep_fns")


def _gone(pid: int) -> bool:
    """Whether process ``pid`` is reaped (a zombie still has its /proc entry)."""
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("ordered", [False, True])
def test_the_workers_are_reaped_when_optimize_returns(tmp_path: Path, ordered: bool) -> None:
    """The index is published while the workers exit; none is left running or as a zombie."""
    out = tmp_path / "out"
    optimize(fns.worker_pid, list(range(400)), out, chunk_size=16, num_workers=2, start_method="fork",
             keep_data_ordered=ordered, verbose=False)  # fmt: skip
    samples = list(DatasetReader(out))
    assert [s["i"] for s in samples] == list(range(400))
    pids = {s["pid"] for s in samples}
    assert len(pids) == 2, "each worker wrote from its first batch"
    assert all(_gone(pid) for pid in pids)
    assert mp.active_children() == []
    assert not list(out.glob(".litdata-staging-*"))


@pytest.mark.timeout(60)  # a hang fails here; no timed assertion
def test_a_failure_while_publishing_still_reaps_the_workers(tmp_path: Path) -> None:
    """The index cannot be published (the output's lock was taken away): the error, no zombie, nothing half-written."""
    out, pids = tmp_path / "out", tmp_path / "pids"
    pids.mkdir()
    with pytest.raises(OutputLockLostError, match="no longer this job's"):
        optimize(fns.PidAndLockRemover(str(out), str(pids)), list(range(40)), out, chunk_size=4, num_workers=2,
                 start_method="fork", verbose=False)  # fmt: skip
    workers = [int(p.name) for p in pids.iterdir()]
    assert workers and all(_gone(pid) for pid in workers)
    assert mp.active_children() == []
    assert not (out / "index.json").exists()
    assert not list(out.rglob("*.bin")), "the chunks of the job that failed are removed"
    assert not list(out.glob(".litdata-staging-*"))
