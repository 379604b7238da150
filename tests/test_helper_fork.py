"""The obstore helper is a fork of its root process: what it must leave behind, and who else forks.

The scenarios run as real root processes (``tests/scripts/helper_fork.py``). No test waits on a
clock: a hang fails on pytest's timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter
from litdata_io import get_storage
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

ROOT = Path(__file__).resolve().parents[1]
N = 40
SIGINT_BIT, SIGTERM_BIT = 1 << (signal.SIGINT - 1), 1 << (signal.SIGTERM - 1)


@pytest.fixture
def s3_dataset(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> dict[str, Any]:
    url, options = f"s3://{s3_bucket}/data", s3_server.storage_options()
    writer = BinaryWriter(tmp_path / "local", chunk_size=4)
    for i in range(N):
        writer.add_item(i, {"index": i})
    writer.done()
    writer.merge()
    storage = get_storage(url, options)
    for path in sorted((tmp_path / "local").iterdir()):
        storage.upload(path, path.name)
    return {"url": url, "options": options, "scratch": str(tmp_path / "scratch"), "key": "index.json"}


def _start(scenario: str, args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.scripts.helper_fork", scenario, json.dumps(args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so the test can Ctrl-C it and its helper alone
    )


def _lines(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, _ = proc.communicate()
    assert proc.returncode == 0, f"exited with {proc.returncode}:\n{out}"
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.mark.timeout(900)
def test_the_forked_helper_keeps_nothing_of_its_parent_and_survives_ctrl_c(s3_dataset: dict[str, Any]) -> None:
    proc = _start("leave_parent", s3_dataset)
    assert proc.stdout is not None
    root = json.loads(proc.stdout.readline())
    assert '"chunks"' in root["data"] and root["placement"] == "helper" and not root["obstore_loaded"]
    assert root["helper_cmdline"] == root["root_cmdline"]  # a fork of the root, not a fresh interpreter
    fds = {fd.split(" ", 1)[0]: fd.split(" ", 1)[1] for fd in root["helper_fds"]}
    assert fds["0"] == "/dev/null"
    assert not [target for target in fds.values() if target == root["pipe"] or target.endswith("/lock")], fds
    masks = root["helper_signals"]
    assert masks["SigIgn"] & SIGINT_BIT  # Ctrl-C is the parent's to handle
    assert not masks["SigCgt"] & (SIGINT_BIT | SIGTERM_BIT)  # the parent's Python handlers are gone
    released = json.loads(proc.stdout.readline())
    assert released == {"where": "released", "pipe_eof": True, "lock_free": True}
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the root and its helper get it
    after_sigint, after_unrelated, after_env = _lines(proc)
    assert after_sigint == {"where": "after-sigint", "same": True, "helper": root["helper"]}
    assert after_unrelated == {"where": "after-unrelated-env", "same": True, "helper": root["helper"]}
    assert after_env["same"] and after_env["helper"] != root["helper"]  # a new environment, a new helper
    while not (_gone(root["helper"]) and _gone(after_env["helper"])):  # end-of-file when the root exits
        os.sched_yield()
    marker = Path(s3_dataset["scratch"]) / "atexit.txt"
    assert marker.read_text().split() == [str(proc.pid)]  # the helpers ran no atexit handler of the user's


@pytest.mark.timeout(900)
def test_a_root_that_imported_obstore_gets_a_fresh_interpreter_as_helper(s3_dataset: dict[str, Any]) -> None:
    [root] = _lines(_start("obstore_imported", s3_dataset))
    assert '"chunks"' in root["data"] and root["placement"] == "helper"
    assert root["helper_cmdline"][1:3] == [
        "-m",
        "litdata_io._processes._helper",
    ]  # obstore's runtime may run in the root


@pytest.mark.timeout(900)
def test_streaming_dataloader_workers_forked_after_the_root_read_the_index_run_obstore_themselves(
    s3_dataset: dict[str, Any],
) -> None:
    lines = _lines(_start("streaming_loader", s3_dataset))
    *batches, root = lines
    assert root["where"] == "root" and not root["obstore_loaded"]  # index.json went through the helper
    assert sorted(i for b in batches for i in b["indexes"]) == list(range(N))
    workers = {b["pid"] for b in batches}
    assert len(workers) == 2 and root["pid"] not in workers
    assert {(b["placement"], b["obstore_loaded"]) for b in batches} == {("here", True)}
    assert not [b["children"] for b in batches if b["children"]]  # no worker started a helper of its own
