"""Read-ahead of the next local chunks: its memory cap (meminfo-format files), its notice, its real effect (mincore)."""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import time
from pathlib import Path

import pytest

from litdata_format import BinaryWriter
from litdata_stream import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata_stream._sources import readahead as _readahead
from litdata_stream._sources.readahead import available_memory, readahead_depth, worker_cap
from litdata_stream._sources.source import LocalSource

# A real /proc/meminfo's lines (kB), with a 16 GiB hugetlb pool that sits idle.
MEMINFO = """\
MemTotal:       32768000 kB
MemFree:         1024000 kB
MemAvailable:    {available} kB
Buffers:          102400 kB
Cached:          2048000 kB
SwapCached:            0 kB
AnonHugePages:     16384 kB
HugePages_Total:    8192
HugePages_Free:     8192
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:        16777216 kB
"""
MiB = 2**20


def _meminfo(tmp_path: Path, available_kb: int, text: str = MEMINFO) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(text.format(available=available_kb))
    return path


def test_available_memory_is_memavailable_without_the_hugepage_pool(tmp_path: Path) -> None:
    assert available_memory(_meminfo(tmp_path, 4096000)) == 4096000 * 1024
    # A kernel without MemAvailable: free plus page cache, still without the pool.
    old = "\n".join(line for line in MEMINFO.splitlines() if not line.startswith("MemAvailable"))
    assert available_memory(_meminfo(tmp_path, 0, old)) == (1024000 + 2048000) * 1024
    assert available_memory(tmp_path / "missing") is None


def test_the_cap_keeps_all_readers_under_half_of_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITDATA_POSIX_FAST", raising=False)
    meminfo = _meminfo(tmp_path, 1024 * 1024)  # 1 GiB available: 512 MiB for read-ahead
    assert readahead_depth(2, 64 * MiB, 2, meminfo) == (2, None)  # 2 x 2 x 64 MiB = 256 MiB fits
    depth, notice = readahead_depth(4, 64 * MiB, 4, meminfo)  # 4 x 4 x 64 MiB = 1 GiB does not
    assert depth == 2 and notice is not None
    assert "capped at 2 chunk(s) per reader (asked 4)" in notice and "4 readers" in notice and "1.0 GiB" in notice
    assert readahead_depth(4, 600 * MiB, 1, meminfo)[0] == 0  # one chunk alone is over the budget
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    assert readahead_depth(4, MiB, 1, meminfo) == (0, None)


def _dataset(path: Path, chunks: int, chunk_mib: int) -> Path:
    writer = BinaryWriter(path, chunk_size=1)
    for i in range(chunks):
        writer.add_item(i, {"i": i, "blob": os.urandom(chunk_mib * MiB)})
    writer.done()
    writer.merge()
    return path


def _evict(path: Path) -> None:
    # DONTNEED drops a file's clean pages from the page cache (no privilege needed); fsync makes them clean.
    for chunk in path.glob("*.bin"):
        descriptor = os.open(chunk, os.O_RDONLY)
        try:
            os.fsync(descriptor)
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


def _resident(path: Path) -> float:
    """The fraction of ``path``'s pages in the page cache, from the kernel (mincore(2) on a mapping of it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    descriptor = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, 0)
        assert address not in (None, ctypes.c_void_p(-1).value)
        vector = ctypes.create_string_buffer(pages)
        assert libc.mincore(address, size, vector) == 0, ctypes.get_errno()
        libc.munmap(address, size)
    finally:
        os.close(descriptor)
    return sum(byte & 1 for byte in vector.raw) / pages


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is Linux/BSD only")
def test_opening_a_chunk_asks_the_next_ones_into_the_page_cache(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "ds", chunks=5, chunk_mib=2)
    files = sorted(root.glob("*.bin"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    _evict(root)
    if max(_resident(f) for f in files) > 0.5:
        pytest.skip("this filesystem keeps its files in memory (DONTNEED evicts nothing): tmpfs?")
    source = LocalSource(root, readahead=2)
    source.schedule([3, 0, 4, 1, 2])
    source.chunk(3)  # the reader starts at 3: 0 and 4 are next
    deadline = time.monotonic() + 15
    while min(_resident(files[0]), _resident(files[4])) < 0.9 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _resident(files[0]) >= 0.9 and _resident(files[4]) >= 0.9
    assert _resident(files[1]) < 0.5 and _resident(files[2]) < 0.5  # beyond the depth: not asked for
    source.close()

    _evict(root)
    off = LocalSource(root, readahead=0)
    off.schedule([3, 0, 4, 1, 2])
    off.chunk(3)
    time.sleep(0.5)
    assert _resident(files[0]) < 0.5 and _resident(files[4]) < 0.5


def test_the_cap_is_noticed_once_by_a_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_readahead, "_noticed", False)
    root = _dataset(tmp_path / "ds", chunks=4, chunk_mib=1)
    monkeypatch.setenv("LITDATA_MEMINFO", str(_meminfo(tmp_path, 3 * 1024)))  # 3 MiB available: 1.5 for read-ahead
    with caplog.at_level(logging.WARNING, logger="litdata.streaming.dataset"):
        dataset = StreamingDataset(str(root), max_pre_download=4)
        assert [int(item["i"]) for item in dataset] == [0, 1, 2, 3]
        assert [int(item["i"]) for item in dataset] == [0, 1, 2, 3]
    notices = [r.getMessage() for r in caplog.records if "read-ahead capped" in r.getMessage()]
    assert len(notices) == 1 and "capped at 1 chunk(s) per reader (asked 4)" in notices[0], notices


def test_the_notices_give_small_sizes_in_a_unit_that_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """40 MiB of MemAvailable reads "40.0 MiB", not "0.0 GiB"; a 300 KiB chunk "300.0 KiB", not "0 MiB"."""
    meminfo = _meminfo(tmp_path, 40 * 1024)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    workers, notice = worker_cap(8, 16 * MiB, meminfo)
    assert workers == 1 and notice is not None
    assert "x 16.0 MiB chunks" in notice and "MemAvailable (40.0 MiB)" in notice, notice
    depth, notice = readahead_depth(4, 300 * 1024, 200, meminfo)
    assert depth == 0 and notice is not None
    assert "x 300.0 KiB chunks" in notice and "MemAvailable (40.0 MiB)" in notice, notice


def test_the_worker_cap_keeps_one_chunk_per_reader_under_half_of_memavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meminfo = _meminfo(tmp_path, 1024 * 1024)  # 1 GiB available: 512 MiB for the readers' chunks
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert worker_cap(8, 64 * MiB, meminfo) == (8, None)  # 8 x 64 MiB = 512 MiB fits
    workers, notice = worker_cap(8, 128 * MiB, meminfo)
    assert workers == 4 and notice is not None
    assert "4 DataLoader worker(s) per rank instead of num_workers=8" in notice and "128.0 MiB" in notice
    assert worker_cap(8, 4096 * MiB, meminfo)[0] == 1  # never fewer than one
    assert worker_cap(8, 0, meminfo) == (8, None)  # nothing read in place (a bucket through the cache)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # four ranks on the node share the budget
    assert worker_cap(8, 64 * MiB, meminfo)[0] == 2
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")  # no in-place reads: no cap
    assert worker_cap(8, 4096 * MiB, meminfo) == (8, None)


def test_a_loader_starts_fewer_workers_when_their_chunks_would_not_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = _dataset(tmp_path / "ds", chunks=4, chunk_mib=1)
    mixed = _dataset(tmp_path / "other", chunks=2, chunk_mib=1)
    # 3 MiB available: 1.5 MiB for the readers, so one worker with its 1 MiB chunk.
    monkeypatch.setenv("LITDATA_MEMINFO", str(_meminfo(tmp_path, 3 * 1024)))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    with caplog.at_level(logging.WARNING, logger="litdata.streaming.dataset"):
        loader = StreamingDataLoader(StreamingDataset(str(root)), batch_size=1, num_workers=2)
        assert loader.num_workers == 1
        assert sorted(int(batch["i"][0]) for batch in loader) == [0, 1, 2, 3]  # every sample once
        # A mixed dataset: a worker reads both, so their chunks add up (2 MiB: over the budget).
        combined = CombinedStreamingDataset([StreamingDataset(str(root)), StreamingDataset(str(mixed))])
        assert StreamingDataLoader(combined, batch_size=1, num_workers=2).num_workers == 1
    notices = [r.getMessage() for r in caplog.records if "DataLoader worker(s) per rank" in r.getMessage()]
    assert len(notices) == 2 and "instead of num_workers=2" in notices[0], notices
    monkeypatch.setenv("LITDATA_MEMINFO", str(_meminfo(tmp_path, 64 * 1024)))  # 64 MiB: room for both
    assert StreamingDataLoader(StreamingDataset(str(root)), batch_size=1, num_workers=2).num_workers == 2
