"""The worker processes' start and end: first batches at start, results published while they exit, reaped later."""

from __future__ import annotations

import importlib
import multiprocessing as mp
import subprocess
import sys
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
def test_the_workers_finish_exiting_after_optimize_returns_and_the_next_job_reaps_them(
    tmp_path: Path, ordered: bool
) -> None:
    """The index is published once every worker reported; the workers, which only exit then, are reaped later."""
    runs = []
    for n in range(2):
        out = tmp_path / f"out{n}"
        optimize(fns.worker_pid, list(range(400)), out, chunk_size=16, num_workers=2, start_method="fork",
                 keep_data_ordered=ordered, verbose=False)  # fmt: skip
        samples = list(DatasetReader(out))
        assert [s["i"] for s in samples] == list(range(400))
        assert len({s["pid"] for s in samples}) == 2, "each worker wrote from its first batch"
        assert not list(out.glob(".litdata-staging-*"))
        runs.append({s["pid"] for s in samples})
    assert all(_gone(pid) for pid in runs[0]), "the second job reaped the first one's workers before it started"
    assert fns.children_reaped() and all(_gone(pid) for pid in runs[1])


@pytest.mark.timeout(120)  # a hang fails here; no timed assertion
def test_a_worker_that_cannot_exit_is_ended_when_the_script_exits(tmp_path: Path) -> None:
    """A worker kept alive by a thread of fn's that never ends does not keep the script from exiting."""
    script = tmp_path / "stuck.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(fns.__file__).parent)!r})\n"
        "import prep_fns\n"
        "from litdata_prep import optimize\n"
        "if __name__ == '__main__':\n"
        "    optimize(prep_fns.leave_a_thread, list(range(4)), sys.argv[1], chunk_size=2, num_workers=2,\n"
        "             start_method='fork', verbose=False)\n"
        "    print('returned', flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out")], capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0 and done.stdout.splitlines() == ["returned"], done.stdout + done.stderr
    pids = {s["pid"] for s in DatasetReader(tmp_path / "out")}
    assert len(pids) == 2 and all(_gone(pid) for pid in pids)


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
