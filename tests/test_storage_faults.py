"""Retries against injected faults: a loopback proxy in front of moto answers 503s, resets
connections (before and during a body) and stalls, on cue. Downloads succeed within the retry
budget and never leave a corrupt or partial file; permanent failures surface at once as one clear
error; the budget is honest (exactly ``1 + max_retries`` requests, obstore's own retries being off).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from litdata_io import Storage, StorageError, get_storage
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

DATA = bytes(range(256)) * 400  # 102400 bytes
FAST = {"backoff_base": 0.01, "backoff_max": 0.05, "max_retries": 4, "timeout": 1.0, "request_timeout": 10.0}


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server.endpoint) as running:
        yield running


@pytest.fixture
def make(s3_server: S3Server, s3_bucket: str, proxy: FaultProxy) -> Callable[..., Storage]:
    s3_server.client().put_object(Bucket=s3_bucket, Key="ds/chunk-0.bin", Body=DATA)

    def open_storage(**options: object) -> Storage:
        merged = {**s3_server.storage_options(proxy.endpoint), **FAST, **options}
        return get_storage(f"s3://{s3_bucket}/ds", storage_options=merged)

    return open_storage


def _only_file(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_download_survives_503s_and_resets(make: Callable[..., Storage], proxy: FaultProxy, tmp_path: Path) -> None:
    storage = make()
    proxy.inject("503", method="GET", times=2)
    proxy.inject("reset", method="GET")
    proxy.inject("reset_body", method="GET")
    assert storage.download("chunk-0.bin", tmp_path / "chunk-0.bin") == len(DATA)
    assert (tmp_path / "chunk-0.bin").read_bytes() == DATA
    assert _only_file(tmp_path) == ["chunk-0.bin"]
    actions = [action for _, _, action in proxy.requests(path_contains="chunk-0.bin")]
    assert actions[-1] == "pass" and {"503", "reset", "reset_body"} <= set(actions)


def test_parallel_ranged_download_retries_each_part(
    make: Callable[..., Storage], proxy: FaultProxy, tmp_path: Path
) -> None:
    storage = make(parallel_threshold=20_000, part_size=16_384, max_concurrency=4)
    proxy.inject("503", method="GET", times=3)
    proxy.inject("reset_body", method="GET", times=2)
    assert storage.download("chunk-0.bin", tmp_path / "out" / "chunk-0.bin") == len(DATA)
    assert (tmp_path / "out" / "chunk-0.bin").read_bytes() == DATA
    assert _only_file(tmp_path / "out") == ["chunk-0.bin"]
    assert len(proxy.requests("GET", "chunk-0.bin")) >= 7 + 5  # 7 parts (+ a probe) and 5 faults


def test_sync_get_and_list_retry(make: Callable[..., Storage], proxy: FaultProxy) -> None:
    storage = make()
    proxy.inject("500", times=2)
    assert [info.key for info in storage.list()] == ["chunk-0.bin"]
    proxy.inject("429", method="GET")
    assert storage.get_range("chunk-0.bin", 10, 20) == DATA[10:20]


def test_stall_longer_than_the_timeout_is_retried(
    make: Callable[..., Storage], proxy: FaultProxy, tmp_path: Path
) -> None:
    storage = make(timeout=0.5)
    proxy.inject("stall", method="GET", stall=5.0)
    started = time.monotonic()
    assert storage.get("chunk-0.bin") == DATA
    assert time.monotonic() - started < 4.0  # gave up on the stalled attempt long before it ended
    assert [action for _, _, action in proxy.requests("GET")] == ["stall", "pass"]


def test_budget_is_exactly_one_plus_max_retries(
    make: Callable[..., Storage], proxy: FaultProxy, tmp_path: Path
) -> None:
    storage = make(max_retries=2)
    proxy.inject("503", method="GET", times=100)
    with pytest.raises(StorageError) as info:
        storage.download("chunk-0.bin", tmp_path / "chunk-0.bin")
    message = str(info.value)
    assert storage.url_for("chunk-0.bin") in message
    assert "3 attempts" in message and "max_retries=2" in message
    assert len(proxy.requests("GET", "chunk-0.bin")) == 3  # no hidden retries underneath ours
    assert _only_file(tmp_path) == []


def test_deadline_stops_retrying(make: Callable[..., Storage], proxy: FaultProxy) -> None:
    storage = make(max_retries=1000, retry_deadline=0.5, backoff_base=0.05, backoff_max=0.1)
    proxy.inject("503", method="GET", times=10_000)
    started = time.monotonic()
    with pytest.raises(StorageError, match="retry budget"):
        storage.get("chunk-0.bin")
    assert time.monotonic() - started < 3.0
    assert len(proxy.requests("GET")) < 50


def test_permanent_403_fails_after_one_more_signature_with_one_clear_error(
    make: Callable[..., Storage], proxy: FaultProxy, tmp_path: Path
) -> None:
    """A refusal is tried once more, signed anew (litdata_io._storage._retry), then fails with one clear error."""
    storage = make()
    proxy.inject("403", method="GET", times=100)
    with pytest.raises(PermissionError) as info:
        storage.download("chunk-0.bin", tmp_path / "chunk-0.bin")
    message = str(info.value)
    assert storage.url_for("chunk-0.bin") in message and "access denied" in message
    assert "litdata-test-secret-value" not in message
    assert len(proxy.requests("GET", "chunk-0.bin")) == 2
    assert _only_file(tmp_path) == []


def test_missing_object_fails_at_once(make: Callable[..., Storage], proxy: FaultProxy, tmp_path: Path) -> None:
    storage = make()
    with pytest.raises(FileNotFoundError, match="chunk-9.bin"):
        storage.download("chunk-9.bin", tmp_path / "chunk-9.bin")
    assert len(proxy.requests(path_contains="chunk-9.bin")) == 1
    assert _only_file(tmp_path) == []


def test_failed_part_leaves_no_partial_file(make: Callable[..., Storage], proxy: FaultProxy, tmp_path: Path) -> None:
    storage = make(parallel_threshold=20_000, part_size=16_384, max_concurrency=2, max_retries=1)
    (tmp_path / "chunk-0.bin").write_bytes(b"previous version")
    proxy.inject("503", method="GET", times=10_000, skip=1)  # the size probe or first part passes
    with pytest.raises(StorageError):
        storage.download("chunk-0.bin", tmp_path / "chunk-0.bin")
    assert (tmp_path / "chunk-0.bin").read_bytes() == b"previous version"
    assert _only_file(tmp_path) == ["chunk-0.bin"]


def test_object_overwritten_during_a_parallel_download_is_not_stitched(
    make: Callable[..., Storage], proxy: FaultProxy, s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    storage = make(parallel_threshold=20_000, part_size=16_384, max_concurrency=1, timeout=0.5)
    proxy.inject("stall", method="GET", path_contains="chunk-0.bin", skip=1, stall=3.0)
    errors: list[BaseException] = []

    def download() -> None:
        try:
            storage.download("chunk-0.bin", tmp_path / "chunk-0.bin")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=download)
    thread.start()
    time.sleep(0.2)  # a part is stalled now; a new version replaces the object meanwhile
    s3_server.client().put_object(Bucket=s3_bucket, Key="ds/chunk-0.bin", Body=DATA[::-1])
    thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], StorageError), errors
    assert "changed while it was being downloaded" in str(errors[0])
    assert _only_file(tmp_path) == []
