"""executor="ray": the checks made before any cluster is touched, and how inputs are cut into batches.

The cluster runs are in tests/test_ray.py (a real Ray cluster in a network namespace).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import litdata_prep
from litdata_prep._ray.executor import RayExecutor, RayPlan, import_ray, ray_executor


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


def test_machine_values_pick_ray_resources() -> None:
    from litdata import Machine

    assert Machine is litdata_prep.Machine
    assert Machine.DATA_PREP.cpus == 32 and Machine.named("a10g") is Machine.A10G and Machine.A10G.gpus == 1
    mine = Machine("mine", cpus=8, gpus=2, memory_gb=16)
    assert mine.ray_resources(4) == {"num_cpus": 2.0, "num_gpus": 0.5, "memory": 4 * 2**30}
    assert mine.bundle() == {"CPU": 8, "GPU": 2, "memory": float(16 * 2**30)}
    assert Machine("small").ray_resources(2) == {"num_cpus": 0.5}
    with pytest.raises(ValueError, match="not a known machine.*DATA_PREP"):
        Machine.named("quantum")
    with pytest.raises(ValueError, match="cpus must be positive"):
        Machine("none", cpus=0)


def test_num_nodes_and_machine_go_to_a_named_ray_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from litdata import Machine

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_executor(None, "optimize", 2, None) is None  # no cluster named: the local multi-node launch
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert ray_executor("ray", "optimize", 3, "DATA_PREP") == RayExecutor(num_nodes=3, machine=Machine.DATA_PREP)
    assert ray_executor(None, "optimize", 2, Machine.CPU) == RayExecutor(num_nodes=2, machine=Machine.CPU)
    assert ray_executor(None, "map", None, "T4") == RayExecutor(num_nodes=1, machine=Machine.T4)
    assert ray_executor(None, "map") is None and ray_executor("processes", "map", 2) is None
    assert RayExecutor(num_nodes=3, machine=Machine("m", cpus=4)).default_workers() == 12
    assert RayExecutor(num_nodes=3).total_workers(2) == 6


def test_num_nodes_without_a_cluster_says_how_to_start_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for env in ("DATA_OPTIMIZER_NUM_NODES", "NNODES", "SLURM_NTASKS", "WORLD_SIZE"):
        monkeypatch.delenv(env, raising=False)
    with pytest.raises(ValueError, match=r"no Ray cluster is named.*ray start --head.*RAY_ADDRESS"):
        litdata_prep.optimize(_record, [1, 2], str(tmp_path / "a"), chunk_size=2, num_nodes=2)
    ray = import_ray()
    if ray.is_initialized():
        pytest.skip("Ray is initialised in this process: it is the cluster")
    with pytest.raises(ValueError, match=r"num_nodes=2 needs a Ray cluster, and none is named.*ray start --head"):
        litdata_prep.optimize(_record, [1, 2], str(tmp_path / "b"), chunk_size=2, num_nodes=2, executor="ray")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
