"""A whole-file compressed chunk is inflated only as far as its index declares, locally and from S3.

Each case replaces one chunk of a real ``compression="zstd"`` dataset with a file whose zstd
frames disagree with ``index.json``: a ~40 KB "bomb" inflating to 512 MiB (its frame header saying
so, or not saying anything), or a frame header / an index entry claiming 8 GiB. A fresh process
reads the dataset and reports the error and how much its peak resident memory grew while
reading the bad chunk: the error must name the chunk file and the declared size, and memory
must stay far below the bomb (the old reader allocated what the frame claimed: +512 MiB, or a bare
MemoryError). S3 is a moto server on 127.0.0.1.
"""

from __future__ import annotations

import functools
import json
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard

from litdata_format import BinaryWriter, load_index
from litdata_io import get_storage
from tests.support.servers import S3Server

_BOMB = 512 << 20  # what the bomb inflates to (the old reader's peak grew by as much)
_PEAK_LIMIT = 200 << 20  # the reader's peak RSS may grow this much while reading it
_HUGE = 8 << 30

# Run in a fresh process, so its peak RSS (VmHWM) is its own: for each dataset, read sample 0 (a
# sound chunk), reset the peak, read the sample in the bad chunk, and report the error and the peak's growth.
_READER = r"""
import json, sys
from litdata_stream import StreamingDataset

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

reports = {}
for case, (url, options) in json.loads(sys.argv[1]).items():
    dataset = StreamingDataset(url, **options)
    dataset[0]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak restarts from the current RSS
    before = peak()
    try:
        dataset[15]
        error = None
    except BaseException as err:  # MemoryError included: the old reader's answer to a huge claim
        error = [type(err).__name__, str(err)]
    reports[case] = {"error": error, "grew": peak() - before}
    del dataset
print(json.dumps(reports))
"""


def _dataset(folder: Path) -> Path:
    writer = BinaryWriter(folder, chunk_size=10, compression="zstd", compression_level="chunk")
    for i in range(20):
        writer.add_item(i, (i, b"x" * 100))
    writer.done()
    writer.merge()
    return folder


@functools.cache
def _zeros_frame(size: int, content_size: bool) -> bytes:
    """A zstd frame of ``size`` zero bytes, made without holding them (with or without its content size)."""
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=content_size)
    stream = compressor.compressobj(size=size if content_size else -1)
    piece = bytes(1 << 20)
    out = [stream.compress(piece) for _ in range(size // len(piece))]
    return b"".join([*out, stream.flush()])


def _claiming(plain: bytes, claimed: int) -> bytes:
    """A frame of ``plain`` whose header claims ``claimed`` bytes of content (an 8-byte content size field)."""
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False, write_checksum=False).compress(plain)
    descriptor = frame[4]
    assert descriptor & 0xE0 == 0 and frame[:4] == b"\x28\xb5\x2f\xfd"  # no content size, not single-segment
    # Content size flag 3 (8 bytes), after the window descriptor byte.
    return frame[:4] + bytes([descriptor | 0xC0]) + frame[5:6] + struct.pack("<Q", claimed) + frame[6:]


def _expanding(info_bytes: int, plain: bytes, index: dict[str, Any]) -> tuple[bytes, int]:
    return _zeros_frame(_BOMB, content_size=True), info_bytes


def _expanding_unsized(info_bytes: int, plain: bytes, index: dict[str, Any]) -> tuple[bytes, int]:
    return _zeros_frame(_BOMB, content_size=False), info_bytes


def _frame_claims_8gib(info_bytes: int, plain: bytes, index: dict[str, Any]) -> tuple[bytes, int]:
    return _claiming(plain, _HUGE), info_bytes


def _index_claims_8gib(info_bytes: int, plain: bytes, index: dict[str, Any]) -> tuple[bytes, int]:
    index["chunks"][1]["chunk_bytes"] = _HUGE
    index["chunks"][1].pop("checksum", None)
    index["chunks"][1].pop("plain_checksum", None)
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(plain)
    return frame, _HUGE


# case: (how to make the bad file and the index's declared size, what the error must say)
CASES: dict[str, tuple[Callable[[int, bytes, dict[str, Any]], tuple[bytes, int]], str]] = {
    "expands-past-index": (_expanding, "decompress"),
    "expands-past-index-unsized-frame": (_expanding_unsized, "decompresses to more than"),
    "frame-header-claims-8gib": (_frame_claims_8gib, f"claims {_HUGE} bytes"),
    "index-claims-8gib": (_index_claims_8gib, "decompressed to"),
}


def _break(folder: Path, case: str) -> tuple[str, int]:
    """Replace chunk 1 as ``case`` says; return its file name and the size its index entry declares."""
    make, _ = CASES[case]
    index_file = folder / "index.json"
    index = json.loads(index_file.read_text())
    info = load_index(folder).chunks[1]
    plain = zstandard.ZstdDecompressor().decompress((folder / info.filename).read_bytes())
    data, declared = make(info.chunk_bytes, plain, index)
    index["chunks"][1].pop("checksum", None)  # the bytes changed: let the size be what stops them
    index_file.write_text(json.dumps(index))
    (folder / info.filename).write_bytes(data)
    return info.filename, declared


def _read(datasets: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _READER, json.dumps(datasets)], check=False, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _check(report: dict[str, Any], filename: str, declared: int, case: str) -> None:
    assert report["error"] is not None, f"{case}: the bad chunk was read as if sound"
    kind, message = report["error"]
    assert kind != "MemoryError", f"{case}: {message}"
    assert report["grew"] < _PEAK_LIMIT, f"{case}: peak RSS grew by {report['grew'] >> 20} MiB reading the bad chunk"
    assert filename in message and f"declares {declared} bytes" in message and CASES[case][1] in message, (
        f"{case}: {message}"
    )


def test_a_local_chunk_inflates_only_to_its_declared_size(tmp_path: Path) -> None:
    broken = {case: _break(_dataset(tmp_path / case), case) for case in CASES}
    reports = _read({case: (str(tmp_path / case), {}) for case in CASES})
    for case, (filename, declared) in broken.items():
        _check(reports[case], filename, declared, case)


@pytest.mark.cloud
def test_a_downloaded_chunk_inflates_only_to_its_declared_size(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    datasets: dict[str, tuple[str, dict[str, Any]]] = {}
    broken = {case: _break(_dataset(tmp_path / case), case) for case in CASES}
    for case in CASES:
        url = f"s3://{s3_bucket}/{case}"
        storage = get_storage(url, s3_server.storage_options())
        for path in sorted((tmp_path / case).iterdir()):
            storage.upload(path, path.name)
        options = {"storage_options": s3_server.storage_options(), "cache_dir": str(tmp_path / "cache" / case)}
        datasets[case] = (url, options)
    reports = _read(datasets)
    for case, (filename, declared) in broken.items():
        _check(reports[case], filename, declared, case)
        assert f"{datasets[case][0]}/{filename}" in reports[case]["error"][1]
    # Nothing inflated is left behind: no published bad chunk, no staging folder.
    cache = tmp_path / "cache"
    assert not [p for p in cache.rglob("chunk-0-1*") if p.is_file()]
    assert not [p for p in cache.rglob(".*partial*")]
