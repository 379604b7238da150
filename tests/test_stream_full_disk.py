"""The chunk cache on a disk that fills up before ``max_cache_size``: room is made, or the error says why.

(And ``StreamingRawDataset(cache_files=True)``, which keeps every file it reads, on a disk too small
for them: the error says which folder and what to do.)

The disk is a real one: a 1 MiB tmpfs (``tests/support/small_disk.py``) holding the cache folder, with
``max_cache_size`` at 100 MB, as when the cap was set for a bigger disk or other files (checkpoints,
logs) filled the disk under it. The dataset is 4 MB of chunks of ~80 KB, read in order from a
``local:`` URL (copied through the cache, as a network drive is) or from the S3 server on 127.0.0.1
(the main process's downloads then go through its obstore helper process).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from litdata_prep import optimize
from tests.scripts.full_disk_repeat import run_once, write_dataset
from tests.support.servers import S3Server
from tests.support.small_disk import on_a_small_disk

READS = """
import json, shutil, sys
from pathlib import Path
from litdata import StreamingDataLoader, StreamingDataset

MOUNT, URL, OPTIONS = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])


def epoch(workers):
    cache = MOUNT / f"cache-{workers}"
    dataset = StreamingDataset(URL, cache_dir=str(cache), max_cache_size="100MB", storage_options=OPTIONS)
    seen, error = [], None
    try:
        for batch in StreamingDataLoader(dataset, batch_size=10, num_workers=workers):
            seen.extend(int(i) for i in batch["i"])
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    partial = sorted(str(p) for p in MOUNT.rglob("*") if ".partial" in p.name)
    shutil.rmtree(cache)  # the next epoch has the disk to itself
    return {"seen": seen, "error": error, "partial": partial}


if __name__ == "__main__":
    print(json.dumps({str(workers): epoch(workers) for workers in map(int, sys.argv[4].split(","))}))
"""

OPENS_ON_A_FULL_DISK = """
import json, sys
from pathlib import Path
from litdata import StreamingDataset

MOUNT, URL = Path(sys.argv[1]), sys.argv[2]
if __name__ == "__main__":
    with open(MOUNT / "checkpoint.bin", "wb") as other:  # someone else's file takes the whole disk
        try:
            while True:
                other.write(bytes(65536))
        except OSError:
            pass
    try:
        StreamingDataset(URL, cache_dir=str(MOUNT / "cache"))
        print(json.dumps({"error": None}))
    except OSError as exc:
        print(json.dumps({"error": str(exc), "errno": exc.errno, "left": sorted(p.name for p in MOUNT.rglob("*.tmp"))}))
"""

RAW_READS = """
import json, sys
from pathlib import Path
from litdata import StreamingRawDataset

MOUNT, URL = Path(sys.argv[1]), sys.argv[2]
if __name__ == "__main__":
    dataset = StreamingRawDataset(URL, cache_dir=str(MOUNT / "cache"), cache_files=True)
    read, error, errno = 0, None, None
    try:
        for i in range(len(dataset)):
            dataset[i]
            read += 1
    except OSError as exc:
        error, errno = str(exc), exc.errno
    files = [p for p in (MOUNT / "cache").rglob("f*.bin")]
    sizes = sorted({p.stat().st_size for p in files})
    print(json.dumps({"read": read, "error": error, "errno": errno, "sizes": sizes}))
"""

PINNED_ELSEWHERE = """
import json, subprocess, sys, time
from pathlib import Path
from litdata_format import ChunkInfo
from litdata_io import ChunkCache, get_storage

MOUNT, SOURCE = Path(sys.argv[1]), sys.argv[2]
HOLDER = '''
import sys, time
from pathlib import Path
from litdata_format import ChunkInfo
from litdata_io import ChunkCache, get_storage
cache = ChunkCache(sys.argv[1], get_storage(sys.argv[2]), "100MB")
for i in range(12):  # 960 KB of the 1 MiB disk, in use
    cache.acquire(ChunkInfo(f"chunk-0-{i}.bin", 80_000, 1))
Path(sys.argv[3]).touch()
time.sleep(2)
cache.close()  # the reader moves on: its chunks can go
'''


def cap(cache):
    return cache._cap(cache._ledger.read())


if __name__ == "__main__":
    folder, ready = str(MOUNT / "cache"), MOUNT / "ready"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, folder, SOURCE, str(ready)])
    while not ready.exists():
        assert holder.poll() is None, "the holder ended"
        time.sleep(0.01)
    cache = ChunkCache(folder, get_storage(SOURCE), "100MB")
    info = ChunkInfo("chunk-0-12.bin", 80_000, 1)
    before, started, error = cap(cache), time.monotonic(), None
    try:
        with cache.use(info) as path:
            got = path.read_bytes() == (Path(SOURCE.removeprefix("local:")) / info.filename).read_bytes()
    except OSError as exc:
        got, error = False, str(exc)
    waited = time.monotonic() - started
    holder.wait()
    other = ChunkCache(folder, get_storage(SOURCE), "100MB")  # another process's view of the cap
    print(json.dumps({"got": got, "error": error, "waited": waited, "before": before, "after": cap(other)}))
"""

FULL = "is full with "


def _blob(i: int) -> dict[str, object]:
    return {"i": i, "data": os.urandom(20_000)}


def _dataset(output: str, samples: int, chunk_bytes: str, options: dict[str, Any] | None = None) -> None:
    optimize(_blob, list(range(samples)), output, chunk_bytes=chunk_bytes, num_workers=1, start_method="fork",
             verbose=False, storage_options=options)  # fmt: skip


def _read(tmp_path: Path, url: str, workers: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    result = on_a_small_disk(tmp_path, READS, url, json.dumps(options or {}), workers)
    assert "Traceback" not in result["stderr"], result["stderr"]
    return result


def test_a_cache_whose_disk_fills_up_makes_room_and_reads_every_sample(tmp_path: Path) -> None:
    _dataset(str(tmp_path / "data"), 200, "100KB")  # 50 chunks, 4 MB: four times the disk
    result = _read(tmp_path, f"local:{tmp_path / 'data'}", "0,2")
    for workers in ("0", "2"):
        epoch = result[workers]
        assert epoch["error"] is None, epoch["error"]
        assert sorted(epoch["seen"]) == list(range(200)), workers  # every sample, once
        assert epoch["partial"] == []  # no half-written download left
    stderr = result["stderr"]
    assert FULL in stderr and "max_cache_size is 100000000" in stderr, stderr  # said, with what to do
    assert "free space on that disk, or lower max_cache_size" in stderr


@pytest.mark.cloud
def test_a_cache_whose_disk_fills_up_makes_room_for_a_bucket_read_through_the_helper(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    url, options = f"s3://{s3_bucket}/full-cache", s3_server.storage_options()
    _dataset(url, 200, "100KB", options)
    result = _read(tmp_path, url, "0", options)  # the main process: downloads run in its obstore helper
    epoch = result["0"]
    assert epoch["error"] is None, epoch["error"]
    assert sorted(epoch["seen"]) == list(range(200))
    assert epoch["partial"] == []
    assert FULL in result["stderr"], result["stderr"]


def test_a_download_waits_for_the_chunks_another_process_reads_on_a_full_disk(tmp_path: Path) -> None:
    # Another process reads 960 KB of chunks of the 1 MiB disk for 2 s: the download that finds
    # the disk full has nothing to evict at first, so it waits for them (it failed at once before),
    # and the cap it lowers to the disk's room holds for every process of the cache.
    source = tmp_path / "chunks"
    source.mkdir()
    for i in range(13):
        (source / f"chunk-0-{i}.bin").write_bytes(os.urandom(80_000))
    result = on_a_small_disk(tmp_path, PINNED_ELSEWHERE, f"local:{source}")
    assert result["error"] is None and result["got"], result
    assert 1.0 < result["waited"] < 10.0, result
    assert result["before"] == 100_000_000 and result["after"] < 1024 * 1024, result
    assert FULL in result["stderr"] and "in every process using it" in result["stderr"], result["stderr"]


def test_two_ranks_of_two_workers_share_a_cache_on_a_disk_another_file_fills(tmp_path: Path) -> None:
    # Four processes fill the 1 MiB disk with one cache, then another file takes its last bytes
    # and what the cache frees for 5 s: every process makes room under the cache's lock, waits
    # for chunks in use elsewhere, and tries again. (tests/scripts/full_disk_repeat.py runs it 20 times.)
    url = write_dataset(tmp_path / "data")
    result = run_once(tmp_path, url, 5.0)
    assert result["passed"], result["why"]
    assert result["taken"] > 0, result  # the other file did take the disk's last bytes


def test_a_chunk_bigger_than_the_disk_is_an_error_naming_the_cache_and_what_to_do(tmp_path: Path) -> None:
    _dataset(str(tmp_path / "data"), 100, "3MB")  # one chunk of 2 MB: more than the whole disk
    result = _read(tmp_path, f"local:{tmp_path / 'data'}", "0")
    epoch = result["0"]
    error = epoch["error"]
    assert error is not None and error.startswith("ChunkDownloadError: no space left for chunk local:"), error
    assert f"in the cache {result['mount']}/cache-0/" in error, error
    assert "Free space on that disk, or set cache_dir to a folder on a larger one" in error, error
    assert epoch["seen"] == [] and epoch["partial"] == []


def test_a_dataset_opened_on_a_full_disk_says_which_folder_and_what_to_do(tmp_path: Path) -> None:
    _dataset(str(tmp_path / "data"), 20, "100KB")
    url = f"local:{tmp_path / 'data'}"
    result = on_a_small_disk(tmp_path, OPENS_ON_A_FULL_DISK, url)
    error = result["error"]
    assert error is not None and result["errno"] == 28, result
    assert f"no space left on the disk of the cache folder to keep {url}/index.json" in error, error
    assert "free space on that disk, or pass cache_dir= a folder on another one" in error, error
    assert f"{result['mount']}/cache/" in error, error  # the folder
    assert result["left"] == []  # the index's temporary copy is gone


def test_raw_files_kept_on_a_disk_too_small_for_them_say_which_folder_and_what_to_do(tmp_path: Path) -> None:
    source = tmp_path / "files"
    source.mkdir()
    for i in range(40):  # 2.4 MB of files: more than the 1 MiB disk
        (source / f"f{i:02d}.bin").write_bytes(os.urandom(60_000))
    result = on_a_small_disk(tmp_path, RAW_READS, f"local:{source}")
    error = result["error"]
    assert error is not None and result["errno"] == 28 and 0 < result["read"] < 40, result
    assert f"no space left in the cache folder for local:{source}/f" in error, error
    assert "cache_files=False to read the files without keeping them" in error, error
    assert f"{result['mount']}/cache/" in error, error  # the folder
    assert result["sizes"] == [60_000]  # every file kept is whole
