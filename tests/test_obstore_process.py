"""Which process talks to the bucket: obstore in workers, the helper in root processes, under every start method.

The scenarios run as real root processes (``tests/scripts/obstore_process.py``), since the rule
depends on what kind of process asks: forked from the test zygote (``tests/support/zygote.py``: torch
imported, obstore never used, as in a user's script that imported torch first), one a fresh
interpreter (it reads the script's output as it comes). No test waits on a clock: a hang fails on pytest's timeout
(generous: on a loaded 2-core machine one scenario took minutes, most of it importing torch).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_io import StorageError, get_storage
from tests.support import servers_extra
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Server
from tests.support.servers_extra import AzuriteServer, FakeGcsServer
from tests.support.zygote import run_python

pytestmark = pytest.mark.cloud

azurite = servers_extra.azurite
fake_gcs = servers_extra.fake_gcs

ROOT = Path(__file__).resolve().parents[1]
N = 40


def _upload(tmp_path: Path, url: str, options: dict[str, Any]) -> None:
    """Write a dataset of N samples to ``url`` (through ``options``)."""
    local = tmp_path / "local"
    writer = BinaryWriter(local, chunk_size=4)
    for i in range(N):
        writer.add_item(i, {"index": i, "x": torch.full((4,), float(i))})
    writer.done()
    writer.merge()
    storage = get_storage(url, options)
    for path in sorted(local.iterdir()):
        storage.upload(path, path.name)


def _script(scenario: str, args: dict[str, Any], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.scripts.obstore_process", scenario, json.dumps(args)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        text=True,
    )


def _run(scenario: str, args: dict[str, Any], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run ``scenario`` to its end, forked from the torch-preloaded zygote (obstore never ran there)."""
    arguments = ["-m", "tests.scripts.obstore_process", scenario, json.dumps(args)]
    done = run_python(arguments, env={**os.environ, **(env or {})}, cwd=ROOT, timeout=900)
    assert done.returncode == 0, f"{scenario} exited with {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _check_stream(lines: list[dict[str, Any]], contexts: list[str]) -> None:
    root = [line for line in lines if line["where"].startswith("root")]
    assert [line["placement"] for line in root] == ["helper", "helper"]
    assert not any(line["obstore_loaded"] for line in root)  # the root kept obstore out of its memory
    assert root[0]["indexes"] == list(range(N))
    for context in contexts:
        batches = [line for line in lines if line["where"] == context]
        assert sorted(i for b in batches for i in b["indexes"]) == list(range(N)), context
        workers = {b["pid"] for b in batches}
        assert len(workers) == 2 and root[0]["pid"] not in workers
        assert {(b["placement"], b["obstore_loaded"]) for b in batches} == {("here", True)}, context
    assert not any(line["sdks"] for line in lines)  # no gcsfs / adlfs / s3fs anywhere


@pytest.fixture
def s3_dataset(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> dict[str, Any]:
    url, options = f"s3://{s3_bucket}/data", s3_server.storage_options()
    _upload(tmp_path, url, options)
    return {"url": url, "options": options, "scratch": str(tmp_path / "scratch"), "key": "index.json"}


@pytest.mark.timeout(900)
def test_s3_root_uses_the_helper_and_workers_use_obstore_under_every_start_method(
    s3_dataset: dict[str, Any],
) -> None:
    contexts = ["fork", "spawn", "forkserver"]
    _check_stream(_run("stream", {**s3_dataset, "contexts": contexts}), contexts)


@pytest.mark.timeout(900)
def test_gcs_in_forked_workers_without_gcsfs(tmp_path: Path, fake_gcs: FakeGcsServer) -> None:
    url, options = f"gs://{fake_gcs.create_bucket()}/data", fake_gcs.gcsfs_options()
    _upload(tmp_path, url, {**options, "backend": "fsspec"})  # the emulator takes gcsfs's uploads, not obstore's
    args = {"url": url, "options": options, "scratch": str(tmp_path / "scratch"), "contexts": ["fork"]}
    _check_stream(_run("stream", args), ["fork"])


@pytest.mark.timeout(900)
def test_azure_in_forked_workers_without_adlfs(tmp_path: Path, azurite: AzuriteServer) -> None:
    url = f"azure://{azurite.create_container()}/data"
    options = {"account_url": azurite.endpoint, "credential": azurite.account_key}
    _upload(tmp_path, url, options)
    args = {"url": url, "options": options, "scratch": str(tmp_path / "scratch"), "contexts": ["fork"]}
    _check_stream(_run("stream", args), ["fork"])


@pytest.mark.timeout(900)
def test_a_fork_after_obstore_ran_here_goes_through_the_helper(s3_dataset: dict[str, Any]) -> None:
    root, child = _run("forced_fork", s3_dataset, env={"LITDATA_OBSTORE_PROCESS": "here"})
    assert (root["placement"], root["obstore_loaded"]) == ("here", True)
    assert child["placement"] == "helper" and child["pid"] != root["pid"]
    assert child["data"] == root["data"] and '"chunks"' in child["data"]


@pytest.mark.timeout(900)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_nothing_per_process_crosses_a_fork(s3_dataset: dict[str, Any]) -> None:
    lines = {line["where"]: line for line in _run("fork_after_everything", s3_dataset)}
    child, root = lines["child"], lines["root"]
    assert child["helper_fd_closed"]  # the parent's helper sees end-of-file only from the parent
    assert not [name for name in child["threads_at_start"] if name.startswith("litdata")]
    assert {"litdata-io-loop", "litdata-prefetch"} <= set(child["threads_after"])  # its own loops
    # A process the packages did not start is a root, wherever it came from: its own helper.
    assert child["placement"] == "helper" and not child["obstore_loaded"]
    assert child["indexes"] == list(range(N))  # its own source, cache state and prefetcher
    assert child["memory"] == "memory" and child["activity_token"] == 0  # not attached to the board
    [parent_slot] = lines["board"]["activities"]
    assert "parent work" in parent_slot and "child work" not in parent_slot
    assert root["indexes"] == list(range(N)) and root["index_ok"] and root["placement"] == "helper"
    marks = {line.split("name: ", 1)[1].split(";")[0]: line for line in lines["trace"]["lines"]}
    assert f"pid: {child['pid']};" in marks["child-mark"] and f"pid: {root['pid']};" in marks["parent-mark"]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # a zombie has exited; its reaper is not ours


@pytest.mark.timeout(900)
def test_the_helper_exits_when_its_parent_is_killed(s3_dataset: dict[str, Any]) -> None:
    proc = _script("hold_helper", s3_dataset)
    assert proc.stdout is not None
    line = json.loads(proc.stdout.readline())
    helper = line["helper"]
    assert line["placement"] == "helper" and not _gone(helper)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    while not _gone(helper):  # end-of-file on its socket; a helper that stays fails on the timeout
        os.sched_yield()


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server.endpoint) as running:
        yield running


@pytest.mark.timeout(900)
def test_a_helper_killed_during_a_call_fails_it_clearly_and_the_next_call_starts_a_new_one(
    s3_server: S3Server, s3_bucket: str, proxy: FaultProxy
) -> None:
    from litdata_io._processes import _helper, _process

    assert _process.obstore_placement() == "helper"  # pytest's own process is a root process
    s3_server.client().put_object(Bucket=s3_bucket, Key="ds/a.bin", Body=b"payload")
    storage = get_storage(f"s3://{s3_bucket}/ds", {**s3_server.storage_options(proxy.endpoint), "max_retries": 0})
    assert storage.get("a.bin") == b"payload"
    connection = _helper._current  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    proxy.inject("stall", method="GET", stall=60)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(storage.get, "a.bin")
        while not any(action == "stall" for _, _, action in proxy.requests()):
            os.sched_yield()  # the helper's request reached the server and hangs there
        os.kill(connection.proc.pid, signal.SIGKILL)
        with pytest.raises(StorageError, match=r"a\.bin: .*helper process .*exited with code -9"):
            pending.result()
    proxy.clear()
    assert storage.get("a.bin") == b"payload"  # a new helper
    assert _helper._current is not connection  # pyright: ignore[reportPrivateUsage]
