"""The prefetcher: order, window, concurrency cap, errors, the sync fallback, fork safety."""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from litdata_format import ChunkInfo
from litdata_io._cache._chunk_cache import ChunkCache
from litdata_io._cache._prefetch import Prefetcher, async_prefetch_enabled, download_concurrency, min_pre_download

FolderStorage: Any = importlib.import_module("_folder_storage").FolderStorage
ENV = ("LITDATA_ASYNC_CHUNK_PREFETCH", "LITDATA_ASYNC_DOWNLOAD_CONCURRENCY", "LITDATA_ASYNC_MIN_PRE_DOWNLOAD")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*ENV, "MAX_CACHE_SIZE"):
        monkeypatch.delenv(name, raising=False)


def setup(tmp_path: Path, count: int = 8, size: int = 1000, **storage: Any) -> tuple[ChunkCache, list[ChunkInfo], Any]:
    src = tmp_path / "src"
    src.mkdir()
    infos = []
    for i in range(count):
        (src / f"chunk-0-{i}.bin").write_bytes(bytes([i]) * size)
        infos.append(ChunkInfo(f"chunk-0-{i}.bin", size, 1))
    store = FolderStorage(src, log=tmp_path / "log", **storage)
    return ChunkCache(tmp_path / "cache", store, "1GB"), infos, store


def downloads(tmp_path: Path) -> list[str]:
    log = tmp_path / "log"
    return [line.split()[1] for line in log.read_text().splitlines()] if log.exists() else []


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.005)


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "litdata-prefetch"]


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (async_prefetch_enabled(), download_concurrency(), min_pre_download()) == (True, 8, 4)
    monkeypatch.setenv("LITDATA_ASYNC_CHUNK_PREFETCH", "0")
    monkeypatch.setenv("LITDATA_ASYNC_DOWNLOAD_CONCURRENCY", "3")
    monkeypatch.setenv("LITDATA_ASYNC_MIN_PRE_DOWNLOAD", "0")
    assert (async_prefetch_enabled(), download_concurrency(), min_pre_download()) == (False, 3, 0)
    monkeypatch.setenv("LITDATA_ASYNC_CHUNK_PREFETCH", "1")
    assert async_prefetch_enabled()
    bad_values = [
        (async_prefetch_enabled, "LITDATA_ASYNC_CHUNK_PREFETCH", "maybe"),
        (download_concurrency, "LITDATA_ASYNC_DOWNLOAD_CONCURRENCY", "0"),
        (download_concurrency, "LITDATA_ASYNC_DOWNLOAD_CONCURRENCY", "x"),
        (min_pre_download, "LITDATA_ASYNC_MIN_PRE_DOWNLOAD", "-1"),
    ]
    for read, name, bad in bad_values:
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=name):
            read()
        monkeypatch.delenv(name)


def test_max_pre_download_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, _, _ = setup(tmp_path, 1)
    assert Prefetcher(cache, 2).max_pre_download == 4
    assert Prefetcher(cache, 6).max_pre_download == 6
    assert Prefetcher(cache, 2, asynchronous=False).max_pre_download == 2
    monkeypatch.setenv("LITDATA_ASYNC_MIN_PRE_DOWNLOAD", "0")
    assert Prefetcher(cache, 2).max_pre_download == 2
    with pytest.raises(ValueError, match="max_pre_download"):
        Prefetcher(cache, 0)


def test_nothing_starts_before_use(tmp_path: Path) -> None:
    cache, _, _ = setup(tmp_path, 1)
    before = len(prefetch_threads())
    prefetcher = Prefetcher(cache, 2)
    assert len(prefetch_threads()) == before
    prefetcher.close()


def test_chunks_arrive_in_order_within_the_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_ASYNC_MIN_PRE_DOWNLOAD", "0")
    cache, infos, _ = setup(tmp_path, 8)
    order = [infos[i] for i in (3, 0, 7, 1, 6, 2, 5, 4)]
    others = set(prefetch_threads())  # prefetchers of datasets earlier tests left for the collector
    with Prefetcher(cache, 2, concurrency=1) as prefetcher:
        prefetcher.schedule(order)
        wait_for(lambda: len(downloads(tmp_path)) == 2)
        time.sleep(0.05)
        assert downloads(tmp_path) == [order[0].filename, order[1].filename]  # the window, no more
        for position, info in enumerate(order):
            path = prefetcher.wait(info)
            assert path.read_bytes() == bytes([int(info.filename[8])]) * 1000
            cache.release(info)
            cache.mark_consumed(info)
            assert len(downloads(tmp_path)) <= position + 3
        assert downloads(tmp_path) == [info.filename for info in order], downloads(tmp_path)
        assert len(set(prefetch_threads()) - others) == 1
    assert set(prefetch_threads()) - others == set()
    assert cache._state.pins == {}


def test_concurrency_cap(tmp_path: Path) -> None:
    cache, infos, store = setup(tmp_path, 12, delay=0.1)
    with Prefetcher(cache, 12, concurrency=3) as prefetcher:
        prefetcher.schedule(infos)
        for info in infos:
            prefetcher.wait(info)
            cache.release(info)
    assert store.peak == 3


def test_skipping_ahead_releases_what_was_skipped(tmp_path: Path) -> None:
    cache, infos, _ = setup(tmp_path, 8)
    with Prefetcher(cache, 4) as prefetcher:
        prefetcher.schedule(infos)
        wait_for(lambda: len(downloads(tmp_path)) == 4)
        path = prefetcher.wait(infos[6])  # beyond the window: fetched at once
        assert path.name == "chunk-0-6.bin"
        assert prefetcher.pending() == 1
        wait_for(lambda: set(cache._state.pins) == {"chunk-0-6.bin", "chunk-0-7.bin"})
        extra = ChunkInfo("chunk-0-0.bin", 1000, 1)  # no longer scheduled: fetched on demand
        assert prefetcher.wait(extra).exists()
        cache.release(extra)
        cache.release(infos[6])
    assert cache._state.pins == {}
    assert len(downloads(tmp_path)) == 6  # 0-3 (window), 6, 7; chunk 0 was still cached
    assert cache.evict(incoming=10**9) == 6000  # nothing is pinned any more


def test_a_failed_download_raises_with_its_url(tmp_path: Path) -> None:
    cache, infos, _ = setup(tmp_path, 3)
    missing = ChunkInfo("chunk-9-9.bin", 10, 1)
    with Prefetcher(cache, 4) as prefetcher:
        prefetcher.schedule([infos[0], missing, infos[1]])
        cache.release(infos[0]) if prefetcher.wait(infos[0]) else None
        with pytest.raises(FileNotFoundError, match=r"test://src/chunk-9-9\.bin"):
            prefetcher.wait(missing)
        assert prefetcher.wait(infos[1]).exists()
        cache.release(infos[1])


def test_synchronous_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_ASYNC_CHUNK_PREFETCH", "0")
    cache, infos, _ = setup(tmp_path, 4)
    before = len(prefetch_threads())
    with Prefetcher(cache, 2) as prefetcher:
        assert not prefetcher.asynchronous and prefetcher.max_pre_download == 2
        prefetcher.schedule(infos)
        time.sleep(0.05)
        assert downloads(tmp_path) == []
        for position, info in enumerate(infos):
            assert prefetcher.wait(info).exists()
            assert len(downloads(tmp_path)) == position + 1
            cache.release(info)
        assert len(prefetch_threads()) == before


def test_uses_uvloop_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("uvloop")
    cache, infos, _ = setup(tmp_path, 1)
    with Prefetcher(cache, 1) as prefetcher:
        prefetcher.schedule(infos)
        cache.release(infos[0]) if prefetcher.wait(infos[0]) else None
        assert prefetcher._now.runner is not None
        assert type(prefetcher._now.runner.loop).__module__.startswith("uvloop")


def _use_in_child(prefetcher: Prefetcher, infos: list[ChunkInfo]) -> None:
    prefetcher.schedule(infos)
    for info in infos:
        if not prefetcher.wait(info, timeout=20).exists():
            os._exit(3)
        prefetcher.cache.release(info)
    prefetcher.close()


# The parent's prefetch thread is alive at the fork on purpose (Python 3.12+ warns about that).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_fork_after_use_then_use_in_the_child(tmp_path: Path) -> None:
    cache, infos, _ = setup(tmp_path, 6, delay=0.05)
    prefetcher = Prefetcher(cache, 2)
    prefetcher.schedule(infos[:3])
    prefetcher.wait(infos[0])  # the parent's loop thread is running, a download may be in flight
    child = multiprocessing.get_context("fork").Process(target=_use_in_child, args=(prefetcher, infos[3:]))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    cache.release(infos[0])
    assert prefetcher.wait(infos[1]).exists()  # the parent goes on unaffected
    cache.release(infos[1])
    prefetcher.close()


def test_close_wakes_a_blocked_reader(tmp_path: Path) -> None:
    cache, infos, _ = setup(tmp_path, 2, delay=5)
    prefetcher = Prefetcher(cache, 2)
    prefetcher.schedule(infos)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            prefetcher.wait(infos[0])
        except BaseException as err:
            outcome.append(err)

    reader = threading.Thread(target=read)
    reader.start()
    wait_for(lambda: len(downloads(tmp_path)) == 2)
    started = time.monotonic()
    prefetcher.close()
    reader.join(10)
    assert not reader.is_alive() and time.monotonic() - started < 5
    assert len(outcome) == 1 and isinstance(outcome[0], concurrent.futures.CancelledError)
    assert cache._state.pins == {} and cache._state.inflight == {}
    assert [
        n for n in os.listdir(tmp_path / "cache") if n != ".cache-bytes"
    ] == []  # the cancelled downloads left nothing
