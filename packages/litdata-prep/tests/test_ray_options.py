"""executor="ray": the checks made before any cluster is touched, and how inputs are cut into batches.

The cluster runs are in tests/test_ray.py (a real Ray cluster in a network namespace).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import litdata_prep
from litdata_prep._ray import RayExecutor, RayPlan, import_ray, ray_executor


def _record(i: int) -> dict[str, int]:
    return {"i": i}


def test_unknown_executor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"executor must be None, 'processes', 'ray' or a RayExecutor"):
        litdata_prep.optimize(_record, [1, 2], str(tmp_path / "out"), chunk_size=2, executor="spark")  # type: ignore[arg-type]


def test_executor_values() -> None:
    assert ray_executor(None, "optimize") is None
    assert ray_executor("processes", "map") is None
    assert ray_executor("ray", "map") == RayExecutor()
    custom = RayExecutor(batches_per_worker=8)
    assert ray_executor(custom, "map") is custom
    with pytest.raises(ValueError, match="batches_per_worker and max_attempts must be at least 1"):
        RayExecutor(batches_per_worker=0)


@pytest.mark.parametrize("option", ["align_chunking", "queue"])
def test_what_needs_local_workers_is_refused_before_ray_starts(tmp_path: Path, option: str) -> None:
    import multiprocessing

    kwargs: dict[str, Any] = (
        {"align_chunking": True, "inputs": [1, 2]} if option == "align_chunking" else {"queue": multiprocessing.Queue()}
    )
    with pytest.raises(ValueError, match="a queue and align_chunking=True need this machine's worker processes"):
        litdata_prep.optimize(_record, output_dir=str(tmp_path / "out"), chunk_size=2, executor="ray", **kwargs)
    assert not (tmp_path / "out").exists()


def test_missing_ray_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray gives `import ray`
    with pytest.raises(ImportError, match=r'pip install "litdata-prep\[ray\]"'):
        import_ray()


@pytest.mark.parametrize(("count", "workers", "per_worker"), [(10, 2, 4), (3, 4, 4), (1000, 3, 4), (7, 1, 1)])
def test_batches_cover_the_inputs_in_order(count: int, workers: int, per_worker: int) -> None:
    plan = RayPlan.make(list(range(count)), workers, per_worker, first_rank=0)
    assert plan.bounds[0][0] == 0 and plan.bounds[-1][1] == count
    assert all(a[1] == b[0] for a, b in zip(plan.bounds, plan.bounds[1:]))
    assert all(stop > start for start, stop in plan.bounds)
    assert len(plan.bounds) == min(count, workers * per_worker)
