"""Two ``optimize`` jobs into one output at once: the second waits for the first (issue 51, 4).

Before, both reported success and the output held one job's samples, or a mix of both (1,253 of A
and 247 of B). Now a job holds the output's lock (``.litdata-lock``, created only if absent: a hard
link locally, ``If-None-Match: *`` on S3) while it works, so the jobs run one after the other:
with ``mode=None`` the second is refused (the output holds a dataset by then), with
``"overwrite"`` the output holds the second job's samples, whole, with ``"append"`` onto a
500-sample dataset it holds all three. A lock whose holder was killed is taken over.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from litdata_stream import StreamingDataset
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

ROOT = Path(__file__).resolve().parents[1]
N = 400  # samples per job
DELAY = 0.004  # seconds per sample: a job takes a couple of seconds, so two started together overlap


def _start(spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.scripts.concurrent_optimize", json.dumps(spec)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


def _jobs_in(output: str, options: dict[str, Any] | None, cache: Path) -> Counter[str]:
    dataset = StreamingDataset(output, storage_options=options, cache_dir=str(cache))
    seen = Counter(str(dataset[i]["job"]) for i in range(len(dataset)))
    return seen


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any] | None]:
    if request.param == "local":
        return str(tmp_path / "out"), None
    server: S3Server = request.getfixturevalue("s3_server")
    return f"s3://{server.create_bucket()}/out", server.storage_options()


@pytest.mark.parametrize("mode", [None, "overwrite", "append"])
def test_two_jobs_into_one_output_run_one_after_the_other(
    where: tuple[str, dict[str, Any] | None], tmp_path: Path, mode: str | None
) -> None:
    output, options = where
    base = {"output": output, "n": N, "storage_options": options, "delay": DELAY}
    if mode == "append":
        first, _ = _result(_start({**base, "job": "base", "n": 500, "delay": 0.0}))
        assert first["ok"], first
    jobs = {name: _start({**base, "job": name, "mode": mode}) for name in ("A", "B")}
    results = {name: _result(proc) for name, proc in jobs.items()}
    seen = _jobs_in(output, options, tmp_path / "cache")
    succeeded = sorted(name for name, (result, _) in results.items() if result["ok"])
    if mode is None:  # the second is refused: the output holds a dataset by then
        assert len(succeeded) == 1, results
        refused = "B" if succeeded == ["A"] else "A"
        assert "DatasetExistsError" in str(results[refused][0]["error"])
        assert seen == Counter({succeeded[0]: N})
    elif mode == "overwrite":
        assert succeeded == ["A", "B"], results
        assert len(seen) == 1 and sum(seen.values()) == N, seen  # one job's samples, whole
    else:
        assert succeeded == ["A", "B"], results
        assert seen == Counter({"base": 500, "A": N, "B": N})
    waited = [name for name, (_, err) in results.items() if "is being written by job" in err]
    assert len(waited) == 1, {name: err[-2000:] for name, (_, err) in results.items()}  # they did overlap
    if mode == "overwrite":
        assert seen == Counter({waited[0]: N})  # the later job's
    if options is None:
        assert not Path(output, ".litdata-lock").exists()


def test_a_killed_jobs_lock_is_taken_over(where: tuple[str, dict[str, Any] | None], tmp_path: Path) -> None:
    """A job SIGKILLed mid-way leaves its lock; the next job on this host sees its pid is gone and takes it."""
    output, options = where
    base = {"output": output, "n": N, "storage_options": options}
    killed = _start({**base, "job": "A", "delay": 0.05})
    lock_seen = _wait_for_lock(output, options)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    started = time.monotonic()
    result, err = _result(_start({**base, "job": "B", "mode": "overwrite"}))
    assert result["ok"], result
    assert "taking over the stale lock" in err and lock_seen
    assert time.monotonic() - started < 60  # long before the lock's STALE_S would have run out
    assert _jobs_in(output, options, tmp_path / "cache") == Counter({"B": N})


def test_a_bucket_lock_not_rewritten_is_taken_over_after_stale_s(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    """A lock of a job on another machine (its pid cannot be checked here) that stopped rewriting it."""
    from litdata_io import get_storage

    output, options = f"s3://{s3_bucket}/out", s3_server.storage_options()
    record = {"job": "elsewhere", "host": "another-machine", "pid": 1, "pid_start": "", "started": "then", "beat": 3}
    get_storage(output, options).put(".litdata-lock", json.dumps(record).encode())
    started = time.monotonic()
    result, err = _result(_start({"output": output, "n": N, "storage_options": options, "job": "B", "stale_s": 3}))
    assert result["ok"], result
    assert "is being written by job elsewhere (pid 1 on another-machine" in err
    assert "taking over the stale lock" in err
    assert time.monotonic() - started >= 3
    assert _jobs_in(output, options, tmp_path / "cache") == Counter({"B": N})


def _wait_for_lock(output: str, options: dict[str, Any] | None) -> bool:
    from litdata_io import get_storage

    storage = get_storage(output, options) if options is not None else None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if storage.exists(".litdata-lock") if storage is not None else Path(output, ".litdata-lock").exists():
            return True
        time.sleep(0.05)
    return False


def test_two_maps_into_one_output_run_one_after_the_other(where: tuple[str, dict[str, Any] | None]) -> None:
    """Before, the second map deleted the first's staging folder (a local output) and lost its files."""
    output, options = where
    base = {"kind": "map", "output": output, "n": 100, "storage_options": options, "delay": 0.02}
    jobs = {name: _start({**base, "job": name}) for name in ("A", "B")}
    results = {name: _result(proc) for name, proc in jobs.items()}
    assert all(result["ok"] for result, _ in results.values()), results
    waited = [name for name, (_, err) in results.items() if "map: " in err and "is being written by job" in err]
    assert len(waited) == 1, {name: err[-2000:] for name, (_, err) in results.items()}
    if options is None:
        names = {p.name for p in Path(output).iterdir()}
    else:
        from litdata_io import get_storage

        names = {info.key for info in get_storage(output, options).list()}
    assert {f"{job}-{i}.txt" for job in "AB" for i in range(100)} <= names
    assert ".litdata-lock" not in names


def test_a_merge_waits_for_the_optimize_writing_its_output(
    where: tuple[str, dict[str, Any] | None], tmp_path: Path
) -> None:
    """Before, the merge wrote its chunks and index.json into the output while the optimize was writing it."""
    output, options = where
    parts = []
    for name in ("P", "Q"):
        result, _ = _result(_start({"output": str(tmp_path / name), "n": 30, "job": name}))
        assert result["ok"], result
        parts.append(str(tmp_path / name))
    writer = _start({"output": output, "n": N, "storage_options": options, "job": "A", "delay": DELAY})
    assert _wait_for_lock(output, options)
    merged, err = _result(_start({"kind": "merge", "output": output, "inputs": parts, "storage_options": options}))
    written, _ = _result(writer)
    assert written["ok"], written
    assert not merged["ok"] and "DatasetExistsError" in str(merged["error"]), merged  # it waited, then found A's
    assert "merge_datasets: " in err and "is being written by job" in err
    assert _jobs_in(output, options, tmp_path / "cache") == Counter({"A": N})


def test_a_dataset_update_commit_waits_for_the_job_writing_the_dataset(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a commit rewrote chunks and index.json while another job (an append, say) was writing them."""
    from litdata_prep import dataset_update, optimize

    monkeypatch.syspath_prepend(str(ROOT))  # the workers import _keyed_sample

    output = tmp_path / "keyed"
    optimize(_keyed_sample, list(range(20)), str(output), chunk_size=5, num_workers=1, key_fn=_key, verbose=False)
    holder = _start({"kind": "hold", "output": str(output), "hold_s": 3.0})
    assert holder.stdout is not None and holder.stdout.readline().startswith("held ")
    held_at = time.monotonic()
    with dataset_update(str(output)) as update:
        update["k7"] = {"key": "k7", "value": 700}
        update.commit()
    assert time.monotonic() - held_at >= 2.5  # it waited for the holder to finish
    result, _ = _result(holder)
    assert result["ok"], result
    assert "dataset_update: " in capfd.readouterr().err
    dataset = StreamingDataset(str(output))
    values = {str(dataset[i]["key"]): int(dataset[i]["value"]) for i in range(len(dataset))}
    assert values["k7"] == 700 and values["k8"] == 8 and len(values) == 20
    assert not (output / ".litdata-lock").exists()


def _keyed_sample(i: int) -> dict[str, Any]:
    return {"key": f"k{i}", "value": i}


def _key(sample: dict[str, Any]) -> str:
    return str(sample["key"])


ATTEMPTS = 4


def test_two_jobs_taking_over_one_stale_lock_do_not_both_hold_it(where: tuple[str, dict[str, Any] | None]) -> None:
    """Before, both deleted the stale lock and created their own: the later deleted the earlier's, and both ran."""
    from litdata_io import get_storage

    output, options = where
    storage = get_storage(output, options)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = options is None  # a local holder is judged by its pid, a bucket's by its rewrites
    record = {
        "job": "gone",
        "host": socket.gethostname() if here else "another-machine",
        "pid": dead.pid if here else 1,
    }
    for attempt in range(4):
        lock = {**record, "pid_start": "", "started": "then", "beat": attempt}
        storage.put(".litdata-lock", json.dumps(lock).encode())
        spec = {"kind": "hold", "output": output, "storage_options": options, "hold_s": 0.3, "stale_s": 1.0}
        spec["start_at"] = time.time() + 3  # both ask at one instant, each sees the stale lock
        holders = [_start(spec) for _ in range(2)]
        spans = []
        for holder in holders:
            out, err = holder.communicate(timeout=300)
            assert holder.returncode == 0 and json.loads(out.splitlines()[-1])["ok"], err[-3000:]
            times = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()[:-1]}
            spans.append((times["held"], times["releasing"]))
        first, second = sorted(spans)
        assert second[0] >= first[1], f"attempt {attempt}: both held the lock at once: {spans}"


def _holds(out: str) -> tuple[float, float]:
    """When a ``hold`` job held the lock: (took it, released it), from its stdout."""
    times = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()[:-1]}
    return times["held"], times["releasing"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_holder_in_another_pid_namespace_is_waited_for(tmp_path: Path) -> None:
    """A job in another container of this host (same host name, its own pids) holds a local output.

    Before, its pid was looked up among this namespace's processes, found gone (or another
    process), and its lock taken over while it ran: both jobs wrote the output at once.
    """
    output = str(tmp_path / "out")
    spec = {"kind": "hold", "output": output, "hold_s": 4.0}
    command = [sys.executable, "-m", "tests.scripts.concurrent_optimize", json.dumps(spec)]
    elsewhere = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", *command],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert elsewhere.stdout is not None and elsewhere.stdout.readline().startswith("held ")
    here, err = _start({**spec, "hold_s": 0.1}).communicate(timeout=300)
    rest, _ = elsewhere.communicate(timeout=300)
    first, second = _holds("held 0\n" + rest), _holds(here)
    assert second[0] >= first[1], f"both held the lock at once: {first}, {second}\n{err[-2000:]}"
    assert "is being written by job" in err and "taking over" not in err
