"""A stopped downloader stalls nobody (issue 26, defect 4).

Process A reads a dataset through a slow fault proxy and is SIGSTOPped while it holds a chunk's
download lock; process B, reading the same cache, takes A's downloads over once they made no
progress for ``LITDATA_DOWNLOAD_STALL_S`` and delivers everything. A, resumed, finishes with the
copy B published; the cache ends with one copy of each chunk, a right ledger and no lock or
staging file. A loader whose worker waits on A names the chunk and A's pid in its watchdog report.
Before the takeover existed B waited for A for ever: these tests failed on their timeouts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter
from litdata_io import get_storage
from litdata_stream import LoaderStallWarning, StreamingDataLoader, StreamingDataset
from tests.scripts.stalled_download import payload
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Server
from tests.support.zygote import PythonProcess, start_python

pytestmark = pytest.mark.cloud

ROOT = Path(__file__).resolve().parents[1]
N = 40  # 4 chunks of ~400 KB
STALL_S = 2.0


@pytest.fixture
def dataset(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> tuple[str, Path]:
    local = tmp_path / "local"
    writer = BinaryWriter(local, chunk_size=10)
    for i in range(N):
        writer.add_item(i, {"index": i, "data": payload(i)})
    writer.done()
    writer.merge()
    storage = get_storage(f"s3://{s3_bucket}/data", s3_server.storage_options())
    for path in sorted(local.iterdir()):
        storage.upload(path, path.name)
    return f"s3://{s3_bucket}/data", local


@pytest.fixture
def slow(s3_server: S3Server) -> Iterator[FaultProxy]:
    # ~8 s per chunk: A is still downloading when it is stopped.
    with FaultProxy(s3_server.endpoint, bandwidth=50e3) as running:
        yield running


def _reader(url: str, cache: Path, storage_options: dict[str, Any], **env: str) -> PythonProcess:
    """``python -m tests.scripts.stalled_download`` (it imports torch: forked from tests/support/zygote.py)."""
    args = {"url": url, "cache": str(cache), "storage_options": storage_options}
    return start_python(["-m", "tests.scripts.stalled_download", json.dumps(args)], cwd=ROOT, env={**os.environ, **env})


def _stop_while_downloading(proc: PythonProcess, cache: Path) -> Path:
    """SIGSTOP ``proc`` once it holds a download lock with its reservation written; that lock."""
    deadline = time.monotonic() + 150  # a loaded machine took over a minute to start a reader (torch)
    while time.monotonic() < deadline:
        assert proc.poll() is None, "A ended before it was stopped"
        for lock in cache.rglob(".chunk-*.lock"):
            try:
                fields = lock.read_text().split()
            except FileNotFoundError:
                continue
            if fields and fields[0].isdigit() and int(fields[0]) > 0:  # only A runs: its reservation is written
                os.kill(proc.pid, signal.SIGSTOP)
                return lock
        time.sleep(0.02)
    raise AssertionError("A never started a download")


def _end(proc: PythonProcess) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    proc.communicate()  # its output folder goes


def _result(proc: PythonProcess, timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def _check_cache(cache: Path, local: Path) -> None:
    """One whole copy of each chunk, a ledger that counts what is there, no lock or staging left."""
    files = [p for p in cache.rglob("*") if p.is_file()]
    hidden = sorted(p.name for p in files if p.name.startswith("."))
    assert all(not name.endswith((".lock", ".new")) for name in hidden), hidden
    assert not [p for p in cache.rglob(".*partial*")], "staging left behind"
    chunks = sorted(p for p in files if p.name.startswith("chunk-"))
    assert sorted(p.name for p in chunks) == sorted(p.name for p in local.glob("chunk-*.bin"))
    for chunk in chunks:
        assert chunk.read_bytes() == (local / chunk.name).read_bytes()
    visible = sum(
        p.stat().st_size for p in files if not any(part.startswith(".") for part in p.relative_to(cache).parts)
    )
    [ledger] = [p for p in files if p.name == ".cache-bytes"]
    assert int(ledger.read_text().split()[0]) == visible


@pytest.mark.timeout(420)
def test_stopped_downloader_is_taken_over(
    dataset: tuple[str, Path], s3_server: S3Server, slow: FaultProxy, tmp_path: Path
) -> None:
    url, local = dataset
    cache = tmp_path / "cache"
    a = _reader(url, cache, {**s3_server.storage_options(slow.endpoint), "timeout": 60.0})
    b: PythonProcess | None = None
    try:
        _stop_while_downloading(a, cache)
        b = _reader(url, cache, s3_server.storage_options(), LITDATA_DOWNLOAD_STALL_S=str(STALL_S))
        try:
            # Generous for a loaded machine (importing torch alone took 17 s here); before the
            # takeover B waited for A for ever.
            got = _result(b, timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"B delivered nothing in 90 s while A (pid {a.pid}) was stopped mid-download")
        assert sorted(got["indexes"]) == list(range(N)) and not got["wrong"]
        os.kill(a.pid, signal.SIGCONT)
        got = _result(a, timeout=120)
        assert sorted(got["indexes"]) == list(range(N)) and not got["wrong"]
    finally:
        _end(a)
        if b is not None:
            _end(b)
    _check_cache(cache, local)


@pytest.mark.timeout(420)
def test_watchdog_names_the_chunk_and_the_stopped_pid(
    dataset: tuple[str, Path], s3_server: S3Server, slow: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, local = dataset
    cache = tmp_path / "cache"
    a = _reader(url, cache, {**s3_server.storage_options(slow.endpoint), "timeout": 60.0})
    try:
        lock = _stop_while_downloading(a, cache)
        chunk = lock.name.removeprefix(".").removesuffix(".lock")
        monkeypatch.setenv("LITDATA_DOWNLOAD_STALL_S", "4")  # the watchdog (1 s) reports first, every second
        ds = StreamingDataset(url, cache_dir=str(cache), storage_options=s3_server.storage_options(),
                              max_cache_size="1GB")  # fmt: skip
        loader = StreamingDataLoader(ds, batch_size=5, num_workers=2, watchdog_s=1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LoaderStallWarning)
            indexes = [int(i) for batch in loader for i in batch["index"]]
        assert sorted(indexes) == list(range(N))
        reports = [str(w.message) for w in caught if issubclass(w.category, LoaderStallWarning)]
        lines = [line for report in reports for line in report.splitlines() if chunk in line]
        assert any(f"pid {a.pid} (stopped)" in line and "waiting for" in line for line in lines), reports
        os.kill(a.pid, signal.SIGCONT)
        got = _result(a, timeout=120)
        assert sorted(got["indexes"]) == list(range(N)) and not got["wrong"]
    finally:
        _end(a)
    _check_cache(cache, local)


@pytest.mark.timeout(420)
def test_a_waiter_warns_within_10_s_and_takes_over_by_30_s_by_default(
    dataset: tuple[str, Path], s3_server: S3Server, slow: FaultProxy, tmp_path: Path
) -> None:
    # Issue 51: B waited 60 s for the stopped A, silent until then.
    url, local = dataset
    cache = tmp_path / "cache"
    a = _reader(url, cache, {**s3_server.storage_options(slow.endpoint), "timeout": 60.0})
    b: PythonProcess | None = None
    try:
        lock = _stop_while_downloading(a, cache)
        chunk = lock.name.removeprefix(".").removesuffix(".lock")
        env = {name: value for name, value in os.environ.items() if not name.startswith("LITDATA_DOWNLOAD_STALL")}
        started = time.monotonic()
        b = start_python(["-m", "tests.scripts.stalled_download", json.dumps({"url": url, "cache": str(cache),
                         "storage_options": s3_server.storage_options()})], cwd=ROOT, env=env)  # fmt: skip
        out, err = b.communicate(timeout=120)
        took = time.monotonic() - started
        assert b.returncode == 0, err[-4000:]
        got = json.loads(out.strip().splitlines()[-1])
        assert sorted(got["indexes"]) == list(range(N)) and not got["wrong"]
        warned = [line for line in err.splitlines() if f"{chunk}: its download by pid {a.pid} (stopped)" in line]
        # Warned once the holder made no progress for 10 s; the figure is when the poll saw it (10-11 s quiet).
        idle = re.search(r"has made no progress for (\d+) s", warned[0]) if warned else None
        assert idle is not None and 10 <= int(idle.group(1)) < 15, err[-4000:]
        assert "takes it over after 30 s without progress" in warned[0], warned[0]
        assert took < 60, f"B took {took:.0f} s: the takeover waited longer than 30 s"
        os.kill(a.pid, signal.SIGCONT)
        got = _result(a, timeout=120)
        assert sorted(got["indexes"]) == list(range(N)) and not got["wrong"]
    finally:
        _end(a)
        if b is not None:
            _end(b)
    _check_cache(cache, local)
