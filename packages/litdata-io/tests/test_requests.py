"""The storage calls a root process sends to its obstore helper, as values."""

from __future__ import annotations

import asyncio
import os
import pickle
from pathlib import Path

import pytest

from litdata_io import get_storage
from litdata_io._processes import _helper, _process
from litdata_io._processes._requests import Copy, Download, DownloadHashed, Get, GetRange, Listing, Put, Upload


def test_requests_pickle_with_absolute_paths_and_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    calls = [
        Get("a.bin"),
        GetRange("a.bin", 2, 5),
        Put("a.bin", memoryview(b"abc")),  # pyright: ignore[reportArgumentType] - what a caller may pass
        Listing("sub/"),
        Copy("a.bin", "b.bin"),
        Upload("local.bin", "a.bin"),
        Download("a.bin", "out/a.bin"),
        DownloadHashed("a.bin", Path("out") / "b.bin"),
    ]
    assert [pickle.loads(pickle.dumps(call)) for call in calls] == calls
    assert calls[2] == Put("a.bin", b"abc")
    assert calls[5] == Upload(str(tmp_path / "local.bin"), "a.bin")  # the helper's working folder is its own
    assert calls[6] == Download("a.bin", str(tmp_path / "out" / "a.bin"))
    assert [call.about() for call in calls] == ["a.bin"] * 3 + ["sub/"] + ["a.bin"] * 4


def test_each_request_runs_its_storage_method(tmp_path: Path) -> None:
    storage = get_storage(str(tmp_path / "root"))
    storage.put("a.bin", b"payload")

    async def run() -> None:
        assert await Get("a.bin").run(storage) == b"payload"
        assert await GetRange("a.bin", 1, 3).run(storage) == b"ay"
        await Copy("a.bin", "b.bin").run(storage)
        assert [info.key for info in await Listing().run(storage)] == ["a.bin", "b.bin"]
        assert await Download("b.bin", tmp_path / "b.bin").run(storage) == 7
        size, checksum = await DownloadHashed("b.bin", tmp_path / "c.bin").run(storage)
        assert (size, checksum.split(":")[0]) == (7, "xxh3_64")

    asyncio.run(run())
    assert (tmp_path / "b.bin").read_bytes() == b"payload"


def test_only_variables_a_client_may_read_start_a_new_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _helper._environment()  # pyright: ignore[reportPrivateUsage]
    for name in ("LOCAL_RANK", "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "PYTEST_CURRENT_TEST", "OMP_NUM_THREADS"):
        monkeypatch.setenv(name, f"changed-{os.getpid()}")
    assert _helper._environment() == before  # pyright: ignore[reportPrivateUsage]
    for name in ("AWS_PROFILE", "AZURITE_BLOB_STORAGE_URL", "GOOGLE_APPLICATION_CREDENTIALS", "HTTPS_PROXY"):
        with monkeypatch.context() as env:
            env.setenv(name, "changed")
            assert _helper._environment() != before, name  # pyright: ignore[reportPrivateUsage]


def test_a_process_is_a_root_until_declared_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITDATA_OBSTORE_PROCESS", raising=False)
    monkeypatch.setattr(_process, "_placement", None)
    monkeypatch.setattr(_process, "_worker", False)
    assert _process.obstore_placement() == "helper"  # pytest is a root, whatever started it
    _process.declare_worker()
    assert _process.obstore_placement() == "here"
