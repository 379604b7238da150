"""The Ray side of tests/test_ray.py: run inside a network namespace that has only ``lo``.

``python -m tests.scripts.ray_job WORKDIR`` starts a ``ray.cluster_utils.Cluster`` (a head and a worker
node of one CPU each, on 127.0.0.1), runs every case against it and shuts it down. Each case
writes its datasets under ``WORKDIR/<case>`` (a dataset written to moto S3 is downloaded there)
and its facts into ``WORKDIR/facts.json``; the test compares them with single-machine runs.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import ray
from ray.cluster_utils import Cluster

import litdata_prep
from litdata_prep import LitDataDatasink, LitDataDatasource, Machine, RayExecutor, WorkerError
from tests.support.ray_inputs import image, record, walks_its_imports
from tests.support.servers import start_moto

_PORTS = itertools.count(21000)


def node_args() -> dict[str, Any]:
    """One node of one CPU. Its agents' ports are given: with port 0 the raylet waits only ~15 s for
    the agent (a Python process) to report the port it took, too short on a loaded machine."""
    ports = ("metrics_agent_port", "dashboard_agent_listen_port", "runtime_env_agent_port", "metrics_export_port")
    return {
        "num_cpus": 1,
        "object_store_memory": 80 * 1024 * 1024,
        "node_ip_address": "127.0.0.1",
        **{name: next(_PORTS) for name in ports},
    }


# A removed node is noticed within ~10 s (Ray's defaults wait ~30 s); not less: on a loaded machine
# a busy raylet answers late and would be declared dead.
SYSTEM = {"health_check_period_ms": 2000, "health_check_failure_threshold": 5, "raylet_start_wait_time_s": 120}
EXECUTOR = RayExecutor(batches_per_worker=4)


def marker_fn(workdir: str, kill_at: int, pause: float = 0.0, wait_for: str | None = None):
    """``record``, but the first time input ``kill_at`` comes, its worker process dies (SIGKILL).

    With ``wait_for`` (a node id) workers on other nodes wait (at most a minute) until that node
    has processed an input, so it takes part in the job however late its actor starts.
    """

    def fn(i: int) -> dict[str, Any]:
        node = ray.get_runtime_context().get_node_id()
        seen = Path(workdir, "seen")
        seen.mkdir(exist_ok=True)
        (seen / f"{i}-{node}").touch()
        deadline = time.monotonic() + 60
        while wait_for and node != wait_for and not any(seen.glob(f"*-{wait_for}")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(pause)
        flag = Path(workdir, f"killed-{kill_at}")
        if i == kill_at and not flag.exists():
            flag.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return record(i)

    return fn


def counting_fn(workdir: str):
    """``record``, noting how many child processes its worker has (a helper for obstore would be one)."""

    def fn(i: int) -> dict[str, Any]:
        children = sum(len(t.read_text().split()) for t in Path("/proc/self/task").glob("*/children"))
        noted = Path(workdir, "children")
        noted.mkdir(exist_ok=True)
        (noted / f"{os.getpid()}-{i}").write_text(str(children))
        return record(i)

    return fn


def failing(i: int) -> dict[str, Any]:
    if i == 13:
        raise ZeroDivisionError(f"cannot process {i}")
    return record(i)


def map_fn(i: int, output_dir: str) -> None:
    Path(output_dir, f"{i:03d}.txt").write_text(f"input {i}\nwalks its imports: {walks_its_imports()}\n")


def case_records(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    litdata_prep.optimize(record, list(range(120)), str(work / "out"), chunk_size=8, executor=EXECUTOR)
    litdata_prep.map(map_fn, list(range(30)), str(work / "map"), executor="ray")


def case_images(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    litdata_prep.optimize(image, list(range(40)), str(work / "out"), chunk_bytes="2kb", executor=EXECUTOR)


def case_append(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    litdata_prep.optimize(record, list(range(50)), str(work / "out"), chunk_size=8, executor=EXECUTOR)
    litdata_prep.optimize(record, list(range(50, 90)), str(work / "out"), chunk_size=8, mode="append", executor="ray")


def case_s3(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    with start_moto() as server:
        bucket = server.create_bucket()
        url = f"s3://{bucket}/ds"
        options = server.storage_options()
        fn = counting_fn(str(work))
        litdata_prep.optimize(fn, list(range(60)), url, chunk_size=8, executor=EXECUTOR, storage_options=options)
        # what the worker actors had started by each input (after their first batch's uploads)
        facts["children"] = sorted({int(p.read_text()) for p in (work / "children").iterdir()})
        # Ray Data from the bucket into a local dataset.
        ray.data.read_datasource(LitDataDatasource(url, storage_options=options)).write_datasink(
            LitDataDatasink(str(work / "from_s3"), chunk_size=8)
        )
        client = server.client()
        for obj in client.list_objects_v2(Bucket=bucket, Prefix="ds/").get("Contents", []):
            dest = work / "out" / obj["Key"][len("ds/") :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(dest))


def case_actor_kill(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    fn = marker_fn(str(work), kill_at=37)
    litdata_prep.optimize(fn, list(range(120)), str(work / "out"), chunk_size=8, executor=EXECUTOR)
    facts["killed"] = (work / "killed-37").exists()


def case_fn_error(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    try:
        litdata_prep.optimize(failing, list(range(40)), str(work / "out"), chunk_size=8, executor=EXECUTOR)
    except WorkerError as err:
        facts.update(message=str(err), input=err.input, position=err.position, traceback=err.remote_traceback)


def case_ray_data(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    litdata_prep.optimize(record, list(range(70)), str(work / "source"), chunk_size=8, executor=EXECUTOR)
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    ds = ray.data.read_datasource(LitDataDatasource(str(work / "source")))
    facts["count"] = ds.count()
    ds.write_datasink(LitDataDatasink(str(work / "copy"), chunk_size=8))
    items = ray.data.from_items([{"i": i, "text": f"t{i}"} for i in range(25)], override_num_blocks=3)
    items.write_datasink(LitDataDatasink(str(work / "items"), chunk_size=4))


def case_driver_kill(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    """A driver (another process) is killed mid-job; a second run with use_checkpoint finishes it."""
    env = {**os.environ, "RAY_ADDRESS": cluster.address}
    child = subprocess.Popen([sys.executable, "-m", "tests.scripts.ray_job", "--checkpointed", str(work)], env=env)
    checkpoint = work / "out" / ".checkpoints" / "ray.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:
        if checkpoint.is_file() and json.loads(checkpoint.read_text())["done"]:
            break
        time.sleep(0.2)
    child.kill()
    child.wait()
    facts["done_before_kill"] = len(json.loads(checkpoint.read_text())["done"])
    run_checkpointed(work)


def run_checkpointed(work: Path) -> None:
    fn = marker_fn(str(work), kill_at=-1, pause=0.05)
    litdata_prep.optimize(
        fn, list(range(80)), str(work / "out"), chunk_size=8, use_checkpoint=True, executor=EXECUTOR, verbose=False
    )


def case_node_kill(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    """A third node joins; once it has processed inputs, it is removed from the cluster mid-job."""
    node = cluster.add_node(**node_args())
    cluster.wait_for_nodes()
    node_id = node.node_id
    removed = threading.Event()

    def remove_when_busy() -> None:
        while not removed.is_set():
            if any(p.name.endswith(node_id) for p in (work / "seen").glob("*")):
                cluster.remove_node(node, allow_graceful=False)
                removed.set()
                return
            time.sleep(0.05)

    (work / "seen").mkdir()
    watcher = threading.Thread(target=remove_when_busy, daemon=True)
    watcher.start()
    fn = marker_fn(str(work), kill_at=-1, pause=0.1, wait_for=node_id)
    litdata_prep.optimize(fn, list(range(90)), str(work / "out"), chunk_size=8, executor=RayExecutor(num_cpus=1))
    facts["removed"] = removed.is_set()
    removed.set()
    facts["on_removed_node"] = sum(1 for p in (work / "seen").glob("*") if p.name.endswith(node_id))


def case_nodes(work: Path, facts: dict[str, Any], cluster: Cluster) -> None:
    """num_nodes/machine with RAY_ADDRESS naming the cluster: the same optimize/map call runs on both nodes."""
    os.environ["RAY_ADDRESS"] = str(cluster.address)
    try:
        one_cpu = Machine("TEST", cpus=1)
        fn = marker_fn(str(work), kill_at=-1, pause=0.05)
        litdata_prep.optimize(fn, list(range(60)), str(work / "out"), chunk_size=8, num_nodes=2, machine=one_cpu,
                              num_workers=1)  # fmt: skip
        facts["nodes"] = sorted({p.name.split("-", 1)[1] for p in (work / "seen").glob("*")})
        facts["cluster_nodes"] = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        litdata_prep.map(map_fn, list(range(20)), str(work / "map"), num_nodes=2, machine=one_cpu, num_workers=1)
        try:  # 3 distinct nodes of this 2-node cluster can never be placed: a short wait shows the error
            litdata_prep.optimize(record, list(range(10)), str(work / "three"), chunk_size=8, num_nodes=3,
                                  machine=one_cpu, executor=RayExecutor(placement_timeout=1))  # fmt: skip
        except ValueError as err:
            facts["too_many"] = str(err)
    finally:
        del os.environ["RAY_ADDRESS"]


CASES = {
    "records": case_records,
    "images": case_images,
    "append": case_append,
    "s3": case_s3,
    "actor_kill": case_actor_kill,
    "fn_error": case_fn_error,
    "ray_data": case_ray_data,
    "driver_kill": case_driver_kill,
    "nodes": case_nodes,
    "node_kill": case_node_kill,  # last: it leaves the cluster with one node fewer
}


def main(workdir: Path, names: list[str]) -> int:
    facts: dict[str, Any] = {}
    cluster = Cluster(
        initialize_head=True, head_node_args={**node_args(), "include_dashboard": False, "_system_config": SYSTEM}
    )
    try:
        cluster.add_node(**node_args())
        cluster.wait_for_nodes()
        ray.init(address=cluster.address)
        for name in names:
            start = time.monotonic()
            facts[name] = {}
            (workdir / name).mkdir(parents=True, exist_ok=True)
            try:
                CASES[name](workdir / name, facts[name], cluster)
            except Exception:
                facts[name]["error"] = traceback.format_exc()
            # Every node's temporary directory is this one: the staging folders attempts left there.
            facts[name]["temp_staging"] = sorted(p.name for p in Path(tempfile.gettempdir()).glob("litdata-*"))
            facts[name]["seconds"] = round(time.monotonic() - start, 1)
            (workdir / "facts.json").write_text(json.dumps(facts, indent=1))
    finally:
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--checkpointed":
        ray.init(address=os.environ["RAY_ADDRESS"])
        run_checkpointed(Path(sys.argv[2]))
        sys.exit(0)
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:] or list(CASES)))
