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

from litdata_format._chunks._compression import decompress, decompress_file
from litdata_format._chunks._mds import mds_decompress

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


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_a_snappy_shard_declaring_another_size_is_refused_before_inflating() -> None:
    # A raw snappy block opens with its uncompressed length: read before anything is inflated, and
    # without python-snappy (the refusal needs no codec).
    claims_a_gib = _varint(1 << 30) + b"\x00" * 16
    with pytest.raises(
        ValueError, match=r"shard s\.mds\.snappy: its snappy header declares 1073741824 bytes but the index"
    ):
        mds_decompress(claims_a_gib, "snappy", "s.mds.snappy", 1000)
    with pytest.raises(ValueError, match=r"shard s\.mds\.snappy: no snappy length header"):
        mds_decompress(b"\xff" * 8, "snappy", "s.mds.snappy", 1000)


def test_a_snappy_shard_of_the_declared_size_inflates() -> None:
    snappy = pytest.importorskip("snappy")  # python-snappy is optional: `pip install python-snappy`
    payload = bytes(range(256)) * 400
    assert bytes(mds_decompress(snappy.compress(payload), "snappy", "s", len(payload))) == payload


def test_a_brotli_bomb_stops_one_piece_past_the_declared_size() -> None:
    brotli = pytest.importorskip("brotli")  # optional: `pip install brotli`
    if "output_buffer_limit" not in (brotli.Decompressor.process.__doc__ or ""):
        pytest.skip("brotli before 1.2 cannot limit its output: such shards inflate whole, then are checked")
    bomb = brotli.compress(bytes(_BOMB), quality=1)
    with pytest.raises(
        ValueError, match=r"shard b\.mds\.br: decompresses to more than 4096 bytes but the index declares"
    ):
        mds_decompress(bomb, "br", "b.mds.br", 4096)
    payload = bytes(range(256)) * 400
    compressed = brotli.compress(payload)
    assert bytes(mds_decompress(compressed, "br", "b", len(payload))) == payload
    with pytest.raises(ValueError, match="the br stream is truncated"):
        mds_decompress(compressed[: len(compressed) // 2], "br", "b", len(payload))
