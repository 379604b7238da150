"""optimize/map on a real Ray cluster, and Ray Data both ways (issue 18).

One run of ``tests/scripts/ray_job.py`` (a 2-node ``ray.cluster_utils.Cluster``, a third node for the
node-kill case) inside a network namespace with only ``lo``, so Ray listens on nothing else. The
run writes datasets and facts; each test compares them with what this machine's worker processes
write for the same inputs. Every process the run started carries a marker in its environment:
afterwards none may be left (they are killed and the test fails).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import litdata_prep
from litdata_format import INDEX_FILENAME, DatasetReader, load_index
from litdata_format.internal import parse_chunk_name
from tests.support.ray_inputs import image, record
from tests.support.upstream_venv import run_upstream

# The first test also waits for the whole cluster run (its module fixture): ~2.5 min on a loaded machine.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[1]
_MARK = "LITDATA_RAY_TEST_RUN"


def _marked(token: str) -> list[int]:
    """The pids of live processes whose environment carries ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{_MARK}={token}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def run() -> Iterator[tuple[Path, dict[str, Any], list[int]]]:
    """The driver's work folder, its facts, and the pids of processes it left behind (killed)."""
    token = uuid.uuid4().hex
    # A short folder: Ray's unix sockets live under TMPDIR and their paths are limited to ~100 bytes.
    with tempfile.TemporaryDirectory(prefix="ldray-", dir="/tmp") as tmp:
        work = Path(tmp) / "w"
        work.mkdir()
        # RAY_ENABLE_UV_RUN_RUNTIME_ENV=0: under `uv run pytest` (an ancestor is `uv run`) Ray would pack this
        # checkout as the job's working_dir and start every worker with `uv run` in an unpacked copy, which
        # builds a venv there on each node (30 of the run's 74 CPU-s); the workers use this interpreter and
        # PYTHONPATH instead, as under any other launcher.
        env = {
            **os.environ,
            _MARK: token,
            "TMPDIR": tmp,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "PYTHONPATH": str(ROOT),
        }
        command = f"ip link set lo up && exec {sys.executable} -m tests.scripts.ray_job {work}"
        proc = subprocess.run(
            ["unshare", "-rn", "sh", "-c", command],
            check=False,
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        left = _marked(token)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        facts_file = work / "facts.json"
        if proc.returncode != 0 or not facts_file.is_file():
            pytest.fail(f"the Ray driver failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
        facts = json.loads(facts_file.read_text())
        print("Ray cases, seconds:", {name: f["seconds"] for name, f in facts.items()})
        yield work, facts, left


def _case(run: tuple[Path, dict[str, Any], list[int]], name: str) -> tuple[Path, dict[str, Any]]:
    work, facts, _ = run
    assert "error" not in facts[name], facts[name]["error"]
    return work / name, facts[name]


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.tolist())
    if hasattr(value, "getdata"):  # a PIL image
        return ("image", value.mode, np.asarray(value).tolist())
    return value


def _samples(path: Path) -> list[Any]:
    reader = DatasetReader(path)
    try:
        return [_plain(s) for s in reader]
    finally:
        reader.close()


def _local(tmp_path: Path, fn: Any, inputs: list[int], name: str = "local", **options: Any) -> list[Any]:
    out = tmp_path / name
    litdata_prep.optimize(
        fn, inputs, str(out), num_workers=2, keep_data_ordered=True, verbose=False, start_method="fork", **options
    )
    return _samples(out)


def _only_referenced_chunks(path: Path) -> None:
    """The folder holds index.json and the chunks it names: no orphan chunk, checkpoint or staging, not even
    an empty folder of them."""
    named = {c.filename for c in load_index(path).chunks}
    entries = {str(p.relative_to(path)) for p in path.rglob("*")}
    assert entries == named | {INDEX_FILENAME}, sorted(entries - named)
    assert all(parse_chunk_name(name) is not None for name in named)


def test_no_ray_process_is_left(run: tuple[Path, dict[str, Any], list[int]]) -> None:
    assert run[2] == [], f"processes of the Ray run were still alive afterwards (killed): {run[2]}"


def test_records_equal_a_local_run(run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path) -> None:
    work, _ = _case(run, "records")
    assert _samples(work / "out") == _local(tmp_path, record, list(range(120)), chunk_size=8)
    _only_referenced_chunks(work / "out")
    files = sorted(p.name for p in (work / "map").iterdir())
    assert files == [f"{i:03d}.txt" for i in range(30)]
    # each batch ran fn in an actor whose imports (before its first batch) were out of the collector's reach
    assert all((work / "map" / f).read_text() == f"input {int(f[:3])}\nwalks its imports: False\n" for f in files)


def test_images_equal_a_local_run(run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path) -> None:
    work, _ = _case(run, "images")
    assert _samples(work / "out") == _local(tmp_path, image, list(range(40)), chunk_bytes="2kb")
    _only_referenced_chunks(work / "out")


def test_append_equals_a_local_append(run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path) -> None:
    work, _ = _case(run, "append")
    _local(tmp_path, record, list(range(50)), chunk_size=8)
    expected = _local(tmp_path, record, list(range(50, 90)), chunk_size=8, mode="append")
    assert _samples(work / "out") == expected
    _only_referenced_chunks(work / "out")


def test_s3_output_and_ray_data_from_a_bucket(run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path) -> None:
    work, facts = _case(run, "s3")
    # the worker actors ran obstore themselves: none started a helper process (each had one before)
    assert facts["children"] == [0]
    expected = _local(tmp_path, record, list(range(60)), chunk_size=8)
    assert _samples(work / "out") == expected
    _only_referenced_chunks(work / "out")
    assert _samples(work / "from_s3") == expected


def test_a_killed_worker_actor_leaves_the_same_dataset(
    run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path
) -> None:
    work, facts = _case(run, "actor_kill")
    assert facts["killed"]
    assert _samples(work / "out") == _local(tmp_path, record, list(range(120)), chunk_size=8)
    _only_referenced_chunks(work / "out")


def test_num_nodes_and_machine_run_on_that_many_nodes(
    run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path
) -> None:
    work, facts = _case(run, "nodes")
    assert len(facts["nodes"]) == 2 and set(facts["nodes"]) <= set(facts["cluster_nodes"]), facts
    assert _samples(work / "out") == _local(tmp_path, record, list(range(60)), chunk_size=8)
    _only_referenced_chunks(work / "out")
    assert sorted(p.name for p in (work / "map").iterdir()) == [f"{i:03d}.txt" for i in range(20)]
    assert "needs 3 distinct nodes" in facts["too_many"] and "ray start --address" in facts["too_many"], facts
    assert not (work / "three" / "index.json").exists()


def test_a_removed_node_leaves_the_same_dataset(run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path) -> None:
    work, facts = _case(run, "node_kill")
    assert facts["removed"] and facts["on_removed_node"] > 0
    assert _samples(work / "out") == _local(tmp_path, record, list(range(90)), chunk_size=8)
    _only_referenced_chunks(work / "out")


def test_a_killed_driver_resumes_from_its_checkpoint(
    run: tuple[Path, dict[str, Any], list[int]], tmp_path: Path
) -> None:
    work, facts = _case(run, "driver_kill")
    assert facts["done_before_kill"] >= 1
    assert _samples(work / "out") == _local(tmp_path, record, list(range(80)), chunk_size=8)
    _only_referenced_chunks(work / "out")


@pytest.mark.parametrize("name", ["actor_kill", "node_kill", "driver_kill"])
def test_the_staging_folders_of_killed_actors_are_removed(
    run: tuple[Path, dict[str, Any], list[int]], name: str
) -> None:
    """A killed actor cannot remove its staging folder: with a local output it is under the driver's staging
    root in the output, which the driver removes at the end (the run after a killed driver, at its start)."""
    work, facts = _case(run, name)
    assert facts["temp_staging"] == []
    assert not (work / "out" / ".litdata-staging-ray").exists()


def test_fn_error_names_the_input_with_the_remote_traceback(run: tuple[Path, dict[str, Any], list[int]]) -> None:
    work, facts = _case(run, "fn_error")
    assert facts["input"] == "13" and facts["position"] == 13
    assert "fn raised on input 13" in facts["message"] and "cannot process 13" in facts["message"]
    assert "ZeroDivisionError" in facts["traceback"] and "def failing" not in facts["message"]
    leftovers = [p.name for p in (work / "out").rglob("*") if p.is_file()] if (work / "out").exists() else []
    assert not any(parse_chunk_name(name) for name in leftovers) and INDEX_FILENAME not in leftovers, leftovers


READ_ALL = """
import pickle, sys
from litdata import StreamingDataset
ds = StreamingDataset(sys.argv[2])
with open(sys.argv[1], "wb") as f:
    pickle.dump([ds[i] for i in range(len(ds))], f)
"""


@pytest.mark.compat
def test_ray_data_round_trip_and_upstream_reads_the_datasink(run: tuple[Path, dict[str, Any], list[int]]) -> None:
    work, facts = _case(run, "ray_data")
    source = _samples(work / "source")
    assert facts["count"] == len(source) == 70
    assert _samples(work / "copy") == source
    _only_referenced_chunks(work / "copy")
    assert _samples(work / "items") == [{"i": i, "text": f"t{i}"} for i in range(25)]
    upstream = [_plain(s) for s in run_upstream(READ_ALL, str(work / "copy"))]
    assert upstream == source
    items = run_upstream(READ_ALL, str(work / "items"))
    assert items == [{"i": i, "text": f"t{i}"} for i in range(25)]
