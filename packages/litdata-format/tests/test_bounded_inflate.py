"""The one function every zstd chunk inflates through, and MDS gzip/bz2 shards: bounded by what is declared.

Bombs here are small (64 MiB of zeros); the peak memory of the real readers is measured with
1 GiB-scale bombs in ``tests/test_bounded_decompression.py``.
"""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import pytest
import zstandard

from litdata_format._compression import decompress, decompress_file
from litdata_format._mds import mds_decompress

_BOMB = 64 << 20


def _zeros(content_size: bool) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=content_size)
    stream = compressor.compressobj(size=_BOMB if content_size else -1)
    piece = bytes(1 << 20)
    return b"".join([*(stream.compress(piece) for _ in range(_BOMB >> 20)), stream.flush()])


@pytest.mark.parametrize("content_size", [True, False])
def test_a_bomb_stops_one_piece_past_the_declared_size(content_size: bool) -> None:
    bomb = _zeros(content_size)
    says = "header claims" if content_size else "decompresses to more than 1000 bytes"
    with pytest.raises(ValueError, match=rf"chunk c\.zstd\.bin: .*{says}.* index\.json declares 1000 bytes"):
        decompress(bomb, "c.zstd.bin", 1000)


def test_the_file_variant_streams_and_leaves_no_target(tmp_path: Path) -> None:
    source, target = tmp_path / "c.zstd.bin", tmp_path / "c.bin"
    source.write_bytes(_zeros(False))
    with pytest.raises(ValueError, match="declares 4096 bytes"):
        decompress_file(source, target, "s3://b/c.zstd.bin", 4096)
    assert not target.exists()
    plain = b"abc" * 1000
    source.write_bytes(zstandard.ZstdCompressor().compress(plain))
    assert decompress_file(source, target, "c", (len(plain), len(plain) + 8)) == len(plain)
    assert target.read_bytes() == plain


def test_frames_written_back_to_back_or_with_a_skippable_frame_read_whole() -> None:
    one = zstandard.ZstdCompressor(write_content_size=False).compress(b"a" * 5000)
    two = zstandard.ZstdCompressor().compress(b"b" * 3000)
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"xyz"
    data = one + skippable + two
    assert decompress(data, "c") == b"a" * 5000 + b"b" * 3000  # no size given: read to the end
    assert decompress(data, "c", 8000) == b"a" * 5000 + b"b" * 3000
    with pytest.raises(ValueError, match="truncated"):
        decompress(one + skippable + two[:-3], "c")  # the last block is cut short


def test_a_short_chunk_says_what_it_found() -> None:
    data = zstandard.ZstdCompressor().compress(b"x" * 100)
    with pytest.raises(ValueError, match="decompressed to 100 bytes but index.json declares 200 bytes"):
        decompress(data, "c", 200)


@pytest.mark.parametrize("family", ["gz", "bz2"])
def test_mds_gzip_and_bz2_shards_are_bounded_too(family: str) -> None:
    zeros = bytes(_BOMB)
    bomb = gzip.compress(zeros) if family == "gz" else bz2.compress(zeros)
    del zeros
    with pytest.raises(ValueError, match="shard s: decompresses to more than 1000 bytes"):
        mds_decompress(bomb, family, "s", 1000)
    good = gzip.compress(b"q" * 10) if family == "gz" else bz2.compress(b"q" * 10)
    assert bytes(mds_decompress(good, family, "s", 10)) == b"q" * 10
    with pytest.raises(ValueError, match="truncated|failed"):
        mds_decompress(good[:-6], family, "s", 10)
