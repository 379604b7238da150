"""The per-chunk checksums the writer records in index.json, and checking files against them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from litdata_format import (
    BinaryWriter,
    ChecksumError,
    DatasetReader,
    FernetEncryption,
    checksum_file,
    complete_dataset,
    load_index,
    verify_file,
)
from litdata_format.internal import decompress, expected_checksum

FIXTURES = Path(__file__).parent / "fixtures" / "upstream-0.2.76"


def _write(out: Path, ranks: int = 1, **options: Any) -> None:
    for rank in range(ranks):
        writer = BinaryWriter(out, chunk_size=4, rank=rank, **options)
        for i in range(10):
            # a tuple: PyTree items (a dict of JSON values would be Arrow rows, never whole-file compressed)
            writer.add_item(i, (i + 100 * rank, f"sample {i}" * (i + 1)))
        writer.done()
    complete_dataset(out)


@pytest.mark.parametrize(
    "options",
    [{}, {"compression": "zstd"}, {"encryption": "chunk"}, {"encryption": "sample"}],
    ids=["plain", "zstd", "chunk-encrypted", "sample-encrypted"],
)
def test_every_chunk_records_the_hash_of_its_stored_bytes(tmp_path: Path, options: dict[str, Any]) -> None:
    if "encryption" in options:
        options = {"encryption": FernetEncryption("secret", level=options["encryption"])}
    _write(tmp_path, ranks=2, **options)
    index = load_index(tmp_path)
    assert len(index.chunks) == 6  # two writers' chunks, merged
    for info in index.chunks:
        stored = tmp_path / info.filename
        assert info.extra["checksum"] == checksum_file(stored)
        assert info.extra["checksum"].startswith("xxh3_64:") and len(info.extra["checksum"]) == 8 + 16
        if "compression" in options:  # what a cache keeps: the decompressed bytes
            plain = tmp_path / "plain.bin"
            plain.write_bytes(decompress(stored.read_bytes(), str(stored)))
            assert info.extra["plain_checksum"] == checksum_file(plain) != info.extra["checksum"]
            assert expected_checksum(info, plain=True) == info.extra["plain_checksum"]
        else:
            assert "plain_checksum" not in info.extra
            assert expected_checksum(info, plain=True) == info.extra["checksum"]
    assert len(list(DatasetReader(tmp_path, encryption=options.get("encryption")))) == 20


def test_a_flipped_byte_fails_verification_naming_both_hashes(tmp_path: Path) -> None:
    _write(tmp_path)
    info = load_index(tmp_path).chunks[1]
    path = tmp_path / info.filename
    assert verify_file(path, info, str(tmp_path))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError) as raised:
        verify_file(path, info, str(tmp_path))
    found = checksum_file(path)
    assert raised.value.found == found and raised.value.expected == info.extra["checksum"]
    message = str(raised.value)
    assert info.filename in message and found in message and info.extra["checksum"] in message


def test_appending_keeps_the_earlier_chunks_hashes(tmp_path: Path) -> None:
    _write(tmp_path)
    before = {c.filename: c.extra["checksum"] for c in load_index(tmp_path).chunks}
    writer = BinaryWriter(tmp_path, chunk_size=4, rank=0, chunk_index=len(before))
    for i in range(5):
        writer.add_item(i, (1000 + i, "more"))
    writer.done()
    complete_dataset(tmp_path)
    after = {c.filename: c.extra.get("checksum") for c in load_index(tmp_path).chunks}
    assert len(after) == len(before) + 2
    assert {name: after[name] for name in before} == before
    assert all(value == checksum_file(tmp_path / name) for name, value in after.items())


def test_datasets_without_hashes_have_nothing_to_check() -> None:
    for folder in sorted(p for p in FIXTURES.iterdir() if (p / "index.json").is_file()):
        index = load_index(folder)
        for info in index.chunks:
            assert expected_checksum(info) is None
            assert not verify_file(folder / info.filename, info, str(folder))


def test_an_unknown_algorithm_is_not_checked(tmp_path: Path) -> None:
    _write(tmp_path)
    info = load_index(tmp_path).chunks[0]
    other = type(info)(info.filename, info.chunk_bytes, info.chunk_size, info.dim, {"checksum": "sha3:00"})
    assert expected_checksum(other) is None
