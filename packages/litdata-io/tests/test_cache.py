"""The chunk cache: atomic publication, one download per chunk, the byte cap, pins across processes,
version folders, sizes checked against the index."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import os
import pickle
import random
import shutil
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from litdata_format import ChunkInfo
from litdata_format.internal import compress
from litdata_io import dataset_version, get_storage
from litdata_io._cache._chunk_cache import ChunkCache, ChunkDownloadError
from litdata_io._cache._clear import cache_path, clear_cache
from litdata_io._cache._disk import resolve_max_cache_size
from litdata_io.internal import file_version

FolderStorage: Any = importlib.import_module("_folder_storage").FolderStorage
LEDGER = ".cache-bytes"
FORK = multiprocessing.get_context("fork")
# These tests fork on purpose (DataLoader workers do); a helper thread may be alive at that moment.
pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")


def make_chunks(folder: Path, count: int, size: int, compression: str | None = None) -> dict[str, bytes]:
    """Write ``count`` random chunk files; return {plain name: content}; infos via ``infos_of``."""
    folder.mkdir(parents=True, exist_ok=True)
    contents = {}
    for i in range(count):
        data = os.urandom(size)
        name = f"chunk-0-{i}.{compression}.bin" if compression else f"chunk-0-{i}.bin"
        (folder / name).write_bytes(compress(data, compression) if compression else data)
        contents[f"chunk-0-{i}.bin"] = data
    return contents


def infos_of(contents: dict[str, bytes], compression: str | None = None) -> list[ChunkInfo]:
    infos = []
    for name, data in contents.items():
        filename = name.replace(".bin", f".{compression}.bin") if compression else name
        infos.append(ChunkInfo(filename, len(data), 1))
    return infos


def leftovers(folder: Path) -> list[str]:
    """Hidden files or folders (locks, staging) anywhere under ``folder``, but the cache's ledger."""
    return [p.name for p in folder.rglob(".*") if p.name != LEDGER] if folder.exists() else []


def listing(folder: Path) -> list[str]:
    """The names in ``folder``, sorted, but the cache's ledger."""
    return sorted(name for name in os.listdir(folder) if name != LEDGER)


def downloads(log: Path) -> list[str]:
    return log.read_text().split("\n")[:-1] if log.exists() else []


@pytest.fixture(autouse=True)
def _no_cache_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAX_CACHE_SIZE", raising=False)


# -- max_cache_size -------------------------------------------------------------------------------
def test_max_cache_size_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_max_cache_size(12345, tmp_path) == 12345
    assert resolve_max_cache_size("100GB", tmp_path) == 100 * 1000**3
    assert resolve_max_cache_size("50GB", tmp_path) == 50 * 1000**3
    assert resolve_max_cache_size("1GiB", tmp_path) == 1024**3
    free = shutil.disk_usage(tmp_path).free
    assert resolve_max_cache_size(0.5, tmp_path) == pytest.approx(free * 0.5, rel=0.01)
    assert resolve_max_cache_size("0.25", tmp_path) == pytest.approx(free * 0.25, rel=0.01)
    assert resolve_max_cache_size(1.0, tmp_path) == pytest.approx(free, rel=0.01)
    expected = min(free * 0.75, free - 50 * 1000**3) if free > 50 * 1000**3 else free * 0.75
    assert resolve_max_cache_size(None, tmp_path / "not" / "made" / "yet") == pytest.approx(expected, rel=0.01)

    monkeypatch.setenv("MAX_CACHE_SIZE", "3MB")
    assert resolve_max_cache_size("100GB", tmp_path) == 3 * 1000**2
    assert resolve_max_cache_size(None, tmp_path) == 3 * 1000**2
    monkeypatch.setenv("MAX_CACHE_SIZE", "0.5")
    assert resolve_max_cache_size(10, tmp_path) == pytest.approx(free * 0.5, rel=0.01)
    monkeypatch.setenv("MAX_CACHE_SIZE", "lots")
    with pytest.raises(ValueError, match="MAX_CACHE_SIZE"):
        resolve_max_cache_size(None, tmp_path)
    monkeypatch.delenv("MAX_CACHE_SIZE")

    for bad in (1.5, 0.0, "1.5", 0, "-1GB", "ten"):
        with pytest.raises(ValueError, match="max_cache_size"):
            resolve_max_cache_size(bad, tmp_path)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        resolve_max_cache_size([1], tmp_path)  # type: ignore[arg-type]


# -- publication ----------------------------------------------------------------------------------
def _watch(path: Path, stop: threading.Event, seen: list[int]) -> None:
    while not stop.is_set():
        with contextlib.suppress(FileNotFoundError):
            seen.append(path.stat().st_size)
        # A compressed file is never visible under a public name.
        seen.extend(-1 for _ in path.parent.glob("*.zstd.bin"))


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_chunk_is_never_visible_half_written(tmp_path: Path, compression: str | None) -> None:
    contents = make_chunks(tmp_path / "src", 1, 256 * 1024, compression)
    [info] = infos_of(contents, compression)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", torn=True), "1GB", compression=compression)
    final = tmp_path / "cache" / "chunk-0-0.bin"
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=_watch, args=(final, stop, seen))
    watcher.start()
    try:
        with cache.use(info) as path:
            assert path == final
            assert path.read_bytes() == contents["chunk-0-0.bin"]
        time.sleep(0.05)  # let the watcher see the published file too
    finally:
        stop.set()
        watcher.join()
    assert seen and set(seen) == {256 * 1024}
    assert listing(tmp_path / "cache") == ["chunk-0-0.bin"]


def test_with_the_registry_local_storage(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 2, 5000, "zstd")
    cache = ChunkCache(tmp_path / "cache", get_storage(str(tmp_path / "src")), "1GB", compression="zstd")
    for info in infos_of(contents, "zstd"):
        with cache.use(info) as path:
            assert path.read_bytes() == contents[path.name]
    assert listing(tmp_path / "cache") == ["chunk-0-0.bin", "chunk-0-1.bin"]


def test_corrupt_compressed_chunk_is_not_published(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "chunk-0-0.zstd.bin").write_bytes(b"not zstd at all")
    info = ChunkInfo("chunk-0-0.zstd.bin", 100, 1)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), "1GB", compression="zstd")
    with pytest.raises(ValueError, match=r"test://src/chunk-0-0\.zstd\.bin"):
        cache.acquire(info)
    assert listing(tmp_path / "cache") == []


def test_download_errors_name_the_url(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), "1GB")
    with pytest.raises(FileNotFoundError, match=r"test://src/chunk-9-9\.bin"):
        cache.ensure(ChunkInfo("chunk-9-9.bin", 10, 1))
    make_chunks(tmp_path / "src", 1, 10)
    broken = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", broken=True), "1GB")
    with pytest.raises(ChunkDownloadError, match=r"test://src/chunk-0-0\.bin.*connection reset"):
        broken.acquire(ChunkInfo("chunk-0-0.bin", 10, 1))
    assert listing(tmp_path / "cache") == []


def test_refuses_the_dataset_folder_as_cache(tmp_path: Path) -> None:
    make_chunks(tmp_path / "data", 1, 10)
    storage = FolderStorage(tmp_path / "data")
    storage.url = str(tmp_path / "data")
    with pytest.raises(ValueError, match="holds the dataset's own files"):
        ChunkCache(tmp_path / "data", storage, "1GB")
    with pytest.raises(ValueError, match="holds the dataset's own files"):
        ChunkCache(tmp_path, storage, "1GB")
    ChunkCache(tmp_path / "data" / "cache", storage, "1GB")  # odd but harmless: the cache deletes only its own
    for folder in ("/", Path.home()):
        with pytest.raises(ValueError, match="not a cache folder"):
            clear_cache(folder)


# -- one download per chunk -----------------------------------------------------------------------
def test_concurrent_ensure_in_one_process_downloads_once(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 1, 4096)
    [info] = infos_of(contents)
    log = tmp_path / "log"
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", delay=0.2, log=log), "1GB")

    async def many() -> list[Path]:
        return await asyncio.gather(*(cache.aacquire(info) for _ in range(8)))

    paths: list[Path] = []
    threads = [threading.Thread(target=lambda: paths.append(cache.acquire(info))) for _ in range(8)]
    for thread in threads:
        thread.start()
    paths.extend(asyncio.run(many()))
    for thread in threads:
        thread.join()
    assert len(paths) == 16 and {p.read_bytes() for p in paths} == {contents["chunk-0-0.bin"]}
    assert downloads(log) == [f"{os.getpid()} chunk-0-0.bin"]
    for _ in range(16):
        cache.release(info)
    with pytest.raises(ValueError, match="not acquired"):
        cache.release(info)
    assert leftovers(tmp_path / "cache") == []


def _ensure_in_child(cache: ChunkCache, info: ChunkInfo, expected: bytes, start: Any) -> None:
    start.wait()
    with cache.use(info) as path:
        if path.read_bytes() != expected:
            os._exit(3)


def test_concurrent_ensure_across_processes_downloads_once(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 1, 4096)
    [info] = infos_of(contents)
    log = tmp_path / "log"
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", delay=0.3, log=log), "1GB")
    start = FORK.Event()
    children = [
        FORK.Process(target=_ensure_in_child, args=(cache, info, contents["chunk-0-0.bin"], start)) for _ in range(6)
    ]
    for child in children:
        child.start()
    start.set()
    for child in children:
        child.join(30)
    assert [child.exitcode for child in children] == [0] * 6
    assert len(downloads(log)) == 1
    assert leftovers(tmp_path / "cache") == []


def _download_forever(cache: ChunkCache, info: ChunkInfo) -> None:
    cache.ensure(info)


def test_a_crashed_download_blocks_nobody(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 1, 4096)
    [info] = infos_of(contents)
    log = tmp_path / "log"
    slow = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", delay=60, log=log), "1GB")
    child = FORK.Process(target=_download_forever, args=(slow, info))
    child.start()
    deadline = time.monotonic() + 10
    while not downloads(log) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert downloads(log), "the child never started downloading"
    assert leftovers(tmp_path / "cache")  # its lock and staging folder
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join()

    fast = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", log=log), "1GB")
    with fast.use(info) as path:
        assert path.read_bytes() == contents["chunk-0-0.bin"]
    assert len(downloads(log)) == 2
    assert leftovers(tmp_path / "cache") == []


# -- the cap and pins -----------------------------------------------------------------------------
def test_eviction_keeps_pinned_chunks_and_prefers_consumed(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 6, 1000)
    infos = infos_of(contents)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), 3000)
    pinned = cache.acquire(infos[0])
    for info in infos[1:3]:
        cache.ensure(info)
    cache.mark_consumed(infos[2])
    assert cache.size() == 3000
    cache.ensure(infos[3])  # needs room: chunk 2 (consumed) goes before chunk 1 (older)
    assert listing(tmp_path / "cache") == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-3.bin"]
    cache.mark_consumed(infos[0])  # consumed but still pinned: stays
    cache.ensure(infos[4])
    cache.ensure(infos[5])
    assert pinned.exists() and pinned.read_bytes() == contents["chunk-0-0.bin"]
    assert cache.size() <= 3000
    cache.release(infos[0])
    assert cache.evict(incoming=3000) == 3000 and cache.size() == 0
    assert leftovers(tmp_path / "cache") == []


def test_downloads_side_by_side_make_room_for_each_other(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 6, 1000)
    infos = infos_of(contents)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", delay=0.1), 3000)
    for info in infos[:3]:
        cache.ensure(info)

    async def three_at_once() -> None:
        await asyncio.gather(*(cache.aensure(info) for info in infos[3:]))

    asyncio.run(three_at_once())
    # Each download counted the others in flight: the three old chunks made way for all three.
    assert listing(tmp_path / "cache") == [info.filename for info in infos[3:]]
    assert leftovers(tmp_path / "cache") == []


def test_a_download_in_another_process_counts_until_it_dies(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 3, 1000)
    infos = infos_of(contents)
    log = tmp_path / "log"
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", log=log), 3000)
    for info in infos[:2]:
        cache.ensure(info)
    slow = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", delay=60, log=log), 3000)
    child = FORK.Process(target=_download_forever, args=(slow, infos[2]))
    child.start()
    deadline = time.monotonic() + 10
    while len(downloads(log)) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(downloads(log)) == 3, "the child never started downloading"
    assert cache.evict(incoming=1000) == 1000  # 2000 cached + the child's 1000 in flight + 1000
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join()
    assert cache.evict(incoming=1000) == 0  # the dead download's leftover lock reserves nothing
    assert cache.evict(incoming=2001) == 1000


def test_a_full_cache_counts_its_folder_once_per_margin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contents = make_chunks(tmp_path / "src", 250, 100)
    infos = infos_of(contents)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), 200 * 100)  # margin: 4 chunks
    for info in infos[:200]:
        cache.ensure(info)
    scans = []
    real_scan = ChunkCache._scan
    monkeypatch.setattr(ChunkCache, "_scan", lambda self, *a: scans.append(1) or real_scan(self, *a))
    for info in infos[200:]:
        with cache.use(info) as path:
            assert path.read_bytes() == contents[info.filename]
        cache.mark_consumed(info)
        held = sum(entry.stat().st_size for entry in os.scandir(tmp_path / "cache") if entry.name.startswith("chunk-"))
        assert held <= 200 * 100
        assert cache._ledger.read()[0] == held  # type: ignore[index]
    # A recount frees what is needed plus the margin: one per 5 downloads, not 2 per download.
    assert 5 <= len(scans) <= 15, len(scans)
    assert cache.size() >= 200 * 100 - 5 * 100


def test_the_ledger_is_recounted_when_it_is_wrong_or_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contents = make_chunks(tmp_path / "src", 4, 1000)
    infos = infos_of(contents)
    folder = tmp_path / "cache"
    cache = ChunkCache(folder, FolderStorage(tmp_path / "src"), 3000)
    for info in infos[:2]:
        cache.ensure(info)
    ledger = folder / LEDGER
    assert ledger.read_text().split()[0] == "2000"
    (folder / "chunk-0-9.bin").write_bytes(b"x" * 1500)  # added behind the cache's back: 3500 now
    assert cache.evict() == 0  # the ledger says 2000 and was counted just now
    monkeypatch.setattr("litdata_io._cache._chunk_cache._RECOUNT_S", 0.0)
    assert cache.evict() == 1000 and cache.size() == 2500  # a minute later: counted, the oldest chunk went
    monkeypatch.undo()
    ledger.write_text("garbage")
    assert cache.evict() == 0 and ledger.read_text().split()[0] == "2500"
    ledger.unlink()
    cache.ensure(infos[2])  # no ledger: counted again before the download, and kept from then on
    assert cache.size() <= 3000 and int(ledger.read_text().split()[0]) == cache.size()
    result = cache.clear()
    assert (result.files, result.bytes) == (2, 2500) and not folder.exists()  # the ledger went too, uncounted


def _hold_then_exit(cache: ChunkCache, info: ChunkInfo, held: Any, go: Any) -> None:
    cache.acquire(info)
    held.set()
    go.wait(30)


def test_a_chunk_in_use_by_another_process_is_never_evicted(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 2, 1000)
    infos = infos_of(contents)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), 1000)
    held, go = FORK.Event(), FORK.Event()
    child = FORK.Process(target=_hold_then_exit, args=(cache, infos[0], held, go))
    child.start()
    assert held.wait(30)
    cache.mark_consumed(infos[0])
    assert cache.evict(incoming=1000) == 0
    assert (tmp_path / "cache" / "chunk-0-0.bin").exists()
    go.set()
    child.join(30)  # its locks die with it
    assert cache.evict(incoming=1000) == 1000


def _sleep(started: Any, seconds: float) -> None:
    started.set()
    time.sleep(seconds)


def test_a_forked_child_does_not_keep_the_parents_pins(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 1, 1000)
    [info] = infos_of(contents)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), 1000)
    cache.acquire(info)
    started = FORK.Event()
    child = FORK.Process(target=_sleep, args=(started, 30))
    child.start()
    try:
        assert started.wait(30)
        cache.release(info)
        assert cache.evict(incoming=1000) == 1000  # the child's inherited descriptor was closed
    finally:
        child.terminate()
        child.join()


def test_pickled_cache_starts_without_pins(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 1, 100)
    [info] = infos_of(contents)
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), "1MB")
    cache.acquire(info)
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.max_cache_size == cache.max_cache_size and copy.cache_dir == cache.cache_dir
    with pytest.raises(ValueError, match="not acquired"):
        copy.release(info)
    with copy.use(info) as path:
        assert path.read_bytes() == contents["chunk-0-0.bin"]
    cache.close()


CHUNK = 16 * 1024
N_CHUNKS = 24
CAP = 4 * CHUNK
N_PROCS = 6


def _reader(cache: ChunkCache, contents: dict[str, bytes], seed: int, use_prefetch: bool, errors: Path) -> None:
    try:
        from litdata_io._cache._prefetch import Prefetcher

        rng = random.Random(seed)
        infos = infos_of(contents)
        for _ in range(2):
            order = rng.sample(infos, len(infos))
            prefetcher = Prefetcher(cache, 2, asynchronous=use_prefetch)
            prefetcher.schedule(order)
            for info in order:
                path = prefetcher.wait(info)
                with open(path, "rb") as handle:
                    first = handle.read(CHUNK // 2)
                    time.sleep(rng.random() * 0.003)
                    data = first + handle.read()
                if data != contents[info.filename]:
                    raise AssertionError(f"{info.filename}: wrong bytes")
                os.stat(path)  # still there while held
                cache.release(info)
                cache.mark_consumed(info)
            prefetcher.close()
    except BaseException:
        errors.with_name(f"error-{seed}").write_text(traceback.format_exc())
        os._exit(1)


def test_many_processes_reading_and_evicting_under_a_small_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_ASYNC_MIN_PRE_DOWNLOAD", "0")
    contents = make_chunks(tmp_path / "src", N_CHUNKS, CHUNK)
    root = tmp_path / "cache-root"
    cache = ChunkCache(root / "dataset", FolderStorage(tmp_path / "src", delay=0.002), CAP)
    children = [
        FORK.Process(target=_reader, args=(cache, contents, seed, seed % 2 == 0, tmp_path / "errors"))
        for seed in range(N_PROCS)
    ]
    for child in children:
        child.start()
    peak = 0
    while any(child.is_alive() for child in children):
        peak = max(peak, cache.size())
        time.sleep(0.001)
    for child in children:
        child.join()
    errors = [p.read_text() for p in tmp_path.glob("error-*")]
    assert not errors, errors[0]
    assert [child.exitcode for child in children] == [0] * N_PROCS
    # Each process pins at most its window (2), the chunk it reads, and one download in flight.
    assert peak <= CAP + N_PROCS * 4 * CHUNK, peak
    assert cache.size() <= CAP
    assert leftovers(root) == []
    result = clear_cache(root)
    assert result.in_use == [] and result.files >= 1
    assert not root.exists()


def test_clear_keeps_chunks_in_use_and_leaves_nothing_behind(tmp_path: Path) -> None:
    contents = make_chunks(tmp_path / "src", 3, 100)
    infos = infos_of(contents)
    root = tmp_path / "root"
    cache = ChunkCache(root / "ds", FolderStorage(tmp_path / "src"), "1MB")
    for info in infos:
        cache.ensure(info)
    (root / "ds" / "index.json").write_text("{}")
    (root / "ds" / ".chunk-0-7.bin.lock").write_text("")  # left by a crash
    (root / "ds" / ".chunk-0-7.bin.partial").mkdir()
    (root / "ds" / ".chunk-0-7.bin.partial" / "chunk-0-7.bin").write_bytes(b"half")
    assert cache.size() == 302  # the index counts; hidden leftovers do not
    with cache.use(infos[0]) as path:
        result = cache.clear()
        assert result.in_use == [path] and path.read_bytes() == contents["chunk-0-0.bin"]
        assert result.files == 4 and result.bytes == 200 + 2 + 4
    assert listing(root / "ds") == ["chunk-0-0.bin"]
    clear_cache(root)
    assert not root.exists()
    assert clear_cache(root).files == 0


def test_cache_path_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "x"))
    assert cache_path() == tmp_path / "x"
    monkeypatch.delenv("LITDATA_CACHE_DIR")
    assert cache_path() == Path.home() / ".lightning" / "chunks"


def test_downloads_and_deletes_are_traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from litdata_io import enable_tracer

    variables = ("LITDATA_LOG_FILE", "LITDATA_TRACE_LEVEL", "LITDATA_TRACE_CATEGORIES")
    for name in variables:
        monkeypatch.setenv(name, "")  # recorded, so the variables enable_tracer writes are undone after
        monkeypatch.delenv(name)
    contents = make_chunks(tmp_path / "src", 1, 100, "zstd")
    [info] = infos_of(contents, "zstd")
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), "1MB", compression="zstd")
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)
    try:
        cache.ensure(info)
        cache.evict(incoming=10**6)
    finally:
        enable_tracer("off", log_file=log)
    lines = log.read_text().splitlines()
    for event in ("download", "decompress", "delete"):
        assert any(f"name: {event};" in line and "chunk-0-0." in line for line in lines), (event, lines)


# -- sizes and versions ---------------------------------------------------------------------------
def _keys(log: Path) -> list[str]:
    return [line.split()[1] for line in downloads(log)]


def test_truncated_cached_chunk_is_fetched_again(tmp_path: Path) -> None:
    infos = infos_of(make_chunks(tmp_path / "src", 2, 5000))
    log = tmp_path / "log"
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", log=log), "1GB")
    want = (tmp_path / "src" / "chunk-0-0.bin").read_bytes()
    with cache.use(infos[0]) as path:
        assert path.read_bytes() == want
    os.truncate(path, 1234)  # what a crash without fsync can leave
    assert not cache.is_cached(infos[0])
    with cache.use(infos[0]) as again:
        assert again == path and again.read_bytes() == want
    assert _keys(log) == ["chunk-0-0.bin", "chunk-0-0.bin"]

    os.truncate(path, 10)
    assert cache.ensure(infos[0]).read_bytes() == want  # the unpinned path checks too
    assert _keys(log).count("chunk-0-0.bin") == 3
    with cache.use(infos[0]):
        pass
    assert _keys(log).count("chunk-0-0.bin") == 3  # whole now: used as it is


def test_chunk_of_the_wrong_size_fails_naming_chunk_url_and_sizes(tmp_path: Path) -> None:
    infos = infos_of(make_chunks(tmp_path / "src", 1, 5000))
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src"), "1GB")
    with cache.use(infos[0]) as path:
        pass
    # The dataset is rewritten in place with a shorter chunk while the old index is in use.
    (tmp_path / "src" / "chunk-0-0.bin").write_bytes(os.urandom(3000))
    os.truncate(path, 100)
    with pytest.raises(ChunkDownloadError, match=r"chunk-0-0\.bin \(test://src/chunk-0-0\.bin\) has 3000 bytes.*5000"):
        cache.acquire(infos[0])
    assert not path.exists()  # neither the truncated copy nor the wrong download is left
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")] == []


def test_older_upstream_sizes_without_the_header_are_accepted(tmp_path: Path) -> None:
    # Upstream writers before October 2024 left the header (4 * (items + 2) bytes) out of chunk_bytes.
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "chunk-0-0.bin").write_bytes(os.urandom(4 * (3 + 2) + 90))
    log = tmp_path / "log"
    cache = ChunkCache(tmp_path / "cache", FolderStorage(tmp_path / "src", log=log), "1GB")
    info = ChunkInfo("chunk-0-0.bin", 90, 3)
    for _ in range(2):
        with cache.use(info):
            pass
    assert _keys(log) == ["chunk-0-0.bin"]


def test_dataset_version_tells_urls_and_indexes_apart() -> None:
    index = b'{"chunks": [], "config": {}}'
    version = dataset_version("s3://b/data", index)
    assert version == dataset_version("s3://b/data/", index) and version.startswith("v-")
    assert version != dataset_version("s3://b/other", index)
    assert version != dataset_version("s3://b/data", index + b" ")


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (3 << 20) + 17])
def test_the_version_of_a_downloaded_index_file_is_that_of_its_bytes(tmp_path: Path, size: int) -> None:
    data = random.Random(size).randbytes(size)
    (tmp_path / "index.json").write_bytes(data)
    for url in ("s3://b/data", "s3://b/data/"):  # read a block at a time, hashed as the bytes in hand are
        assert file_version(url, tmp_path / "index.json") == dataset_version("s3://b/data", data)


@pytest.mark.parametrize("bad", [".hidden", "a/b", "..", ""])
def test_a_version_must_be_one_visible_folder_name(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="cache version"):
        ChunkCache(tmp_path / "cache", FolderStorage(tmp_path), "1GB", version=bad)


def test_a_new_version_clears_the_old_one_but_not_chunks_in_use_nor_other_urls(tmp_path: Path) -> None:
    infos = infos_of(make_chunks(tmp_path / "src", 2, 5000))
    other = infos_of(make_chunks(tmp_path / "other", 2, 5000))
    root = tmp_path / "cache"
    old = ChunkCache(root, FolderStorage(tmp_path / "src"), "1GB", version="v-old")
    neighbour = ChunkCache(root, FolderStorage(tmp_path / "other"), "1GB", version="v-other")
    assert old.path_for(infos[0]) == root / "v-old" / "chunk-0-0.bin"
    pinned = old.acquire(infos[0])
    old.ensure(infos[1])
    neighbour.ensure(other[0])
    (root / "v-old" / "index.json").write_text("{}")

    new = ChunkCache(root, FolderStorage(tmp_path / "src"), "1GB", version="v-new")
    assert sorted(p.name for p in (root / "v-old").iterdir()) == [".source-url", "chunk-0-0.bin"]  # in use
    assert (root / "v-other" / "chunk-0-0.bin").is_file()  # another dataset sharing the folder
    with new.use(infos[0]) as path:
        assert path == root / "v-new" / "chunk-0-0.bin" and path.read_bytes() == pinned.read_bytes()
    old.release(infos[0])

    ChunkCache(root, FolderStorage(tmp_path / "src"), "1GB", version="v-new")
    assert not (root / "v-old").exists()
    assert (root / "v-other" / "chunk-0-0.bin").is_file() and (root / "v-new" / "chunk-0-0.bin").is_file()


def test_the_cap_counts_the_index_files_the_folder_holds(tmp_path: Path) -> None:
    infos = infos_of(make_chunks(tmp_path / "src", 6, 1000))
    root = tmp_path / "cache"
    (root / "v-a").mkdir(parents=True)
    index = root / "v-a" / "index.json"
    index.write_bytes(b"x" * 1500)  # what a dataset keeps next to its chunks
    cache = ChunkCache(root, FolderStorage(tmp_path / "src"), 3500, version="v-a")
    for info in infos:
        with cache.use(info) as path:
            assert path.is_file()
        cache.mark_consumed(info)
        visible = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
        assert visible <= 3500  # the folder as a whole, index included: chunks get 2000 of the 3500
    assert index.read_bytes() == b"x" * 1500  # never evicted
    assert len(list(root.rglob("chunk-*.bin"))) == 2 and cache.size() == 3500
    assert cache.evict(incoming=3500) == 2000 and cache.size() == 1500 and index.is_file()


def test_the_cap_covers_every_version_in_the_folder(tmp_path: Path) -> None:
    infos = infos_of(make_chunks(tmp_path / "src", 4, 1000))
    other = infos_of(make_chunks(tmp_path / "other", 4, 1000))
    root = tmp_path / "cache"
    a = ChunkCache(root, FolderStorage(tmp_path / "src"), 5000, version="v-a")
    b = ChunkCache(root, FolderStorage(tmp_path / "other"), 5000, version="v-b")
    for info in infos:
        a.ensure(info)
    for info in other:
        b.ensure(info)
    assert a.size() == b.size() <= 5000
    assert len(list(root.rglob("chunk-*.bin"))) <= 5
