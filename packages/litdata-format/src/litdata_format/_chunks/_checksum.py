"""Per-chunk checksums: what the writer records in ``index.json`` and readers verify.

Each chunk entry the writer makes carries ``"checksum": "xxh3_64:<16 hex digits>"``, the XXH3
64-bit hash of the file's bytes as stored (after compression and chunk encryption), so a
download can be checked before anything decodes it. A whole-file compressed chunk also carries
``"plain_checksum"``, the hash of the decompressed bytes, which is what a cache keeps on disk.
Upstream LitData ignores both keys. Entries without them (upstream's datasets, older ones) are
not checked.

XXH3 because checking must cost next to nothing next to a download (it hashes several times
faster than ``zlib.crc32`` or SHA-256). It detects damage, not tampering: whoever can rewrite a
chunk can rewrite ``index.json`` too.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

import xxhash

from litdata_format._index._dataset_index import ChunkInfo

__all__ = [
    "Checksum",
    "ChecksumError",
    "checksum_bytes",
    "checksum_file",
    "check_checksum_fields",
    "expected_checksum",
    "verify_file",
]

_ALGORITHM = "xxh3_64"
_BLOCK = 1 << 22
_WELL_FORMED = re.compile(r"^xxh3_64:[0-9a-f]{16}$")
_ANY_ALGORITHM = re.compile(r"^([A-Za-z0-9_.-]+):[0-9A-Za-z+/=_-]+$")


class ChecksumError(ValueError):
    """A chunk file's bytes do not hash to what ``index.json`` records for it.

    Attributes:
        found: what the bytes hash to.
        expected: what the index records.
    """

    # Defaults, so the error rebuilds from its message alone (unpickled, re-raised from a DataLoader worker).
    def __init__(self, message: str, found: str = "", expected: str = "") -> None:
        super().__init__(message)
        self.found, self.expected = found, expected


def _text(digest: int) -> str:
    return f"{_ALGORITHM}:{digest:016x}"


class Checksum:
    """The checksum of bytes that come piece by piece, such as a download as it arrives.

    Feeding each piece while it is still in the CPU's cache saves the second pass over the file
    that :func:`checksum_file` makes::

        checksum = Checksum()
        for piece in pieces:
            checksum.update(piece)
        checksum.text()  # what checksum_file gives for the joined pieces
    """

    __slots__ = ("_hasher",)

    def __init__(self) -> None:
        self._hasher = xxhash.xxh3_64()

    def update(self, piece: Any) -> None:
        """Add the next bytes-like ``piece``."""
        self._hasher.update(piece)

    def text(self) -> str:
        """The checksum string of the bytes so far (``"xxh3_64:<16 hex digits>"``)."""
        return _text(self._hasher.intdigest())


def checksum_bytes(parts: Iterable[Any]) -> str:
    """The checksum string of the concatenation of ``parts`` (bytes-like objects)."""
    checksum = Checksum()
    for part in parts:
        checksum.update(part)
    return checksum.text()


def checksum_file(file: str | os.PathLike[str] | int) -> str:
    """The checksum string of the file at a path, or open as descriptor ``file``.

    The file is mapped, not read, so its bytes are hashed where they lie in the page cache (a
    download just written is there) without a copy; in 4 MiB steps, so another thread waiting
    for the GIL gets it between them.

    Args:
        file: a path, or a descriptor open for reading.
    """
    if not isinstance(file, int):
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            return checksum_file(fd)
        finally:
            os.close(fd)
    checksum = Checksum()
    size = os.fstat(file).st_size
    if size:
        with mmap.mmap(file, size, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
            for start in range(0, size, _BLOCK):
                checksum.update(view[start : start + _BLOCK])
    return checksum.text()


def expected_checksum(info: ChunkInfo, plain: bool = False) -> str | None:
    """What ``info``'s file should hash to: as stored, or decompressed (``plain``), if recorded.

    For a chunk that is not whole-file compressed the two are the same file, so ``plain`` falls
    back to ``checksum``. Values of an algorithm this version does not know are not checked.
    """
    value = info.extra.get("plain_checksum") if plain else None
    if value is None:
        value = info.extra.get("checksum")
    if isinstance(value, str) and value.startswith(_ALGORITHM + ":"):
        return value
    return None


def verify_file(file: str | os.PathLike[str] | int, info: ChunkInfo, where: str, plain: bool = False) -> bool:
    """Raise :class:`ChecksumError` if ``file`` (a path or a descriptor) does not match ``info``'s checksum.

    Returns whether there was a checksum to check. ``where`` names the chunk in the error (a URL
    or the dataset folder).

    Args:
        file: a path, or a descriptor open for reading.
        info: the chunk's entry in the index.
        where: names the chunk in the error (a URL or the dataset folder).
        plain: check against the decompressed file's checksum rather than the stored one's.
    """
    expected = expected_checksum(info, plain)
    if expected is None:
        return False
    found = checksum_file(file)
    if found != expected:
        raise ChecksumError(
            f"chunk {info.filename} ({where}): its bytes hash to {found} but index.json records {expected}; "
            "the file is damaged (on disk or in transit)",
            found,
            expected,
        )
    return True


def check_checksum_fields(chunks: Sequence[ChunkInfo], source: str) -> list[str]:
    """Check what ``verify_chunks=True`` is asked to verify: every chunk's recorded checksums.

    A ``checksum`` or ``plain_checksum`` that is not ``"xxh3_64:<16 hex digits>"`` fails: one
    of another algorithm (a newer writer's) could not be checked, and a malformed one means the
    index is damaged; either way nothing would be verified while the reader was asked to.

    Returns:
        The file names of the chunks that record no checksum (the caller says they go unverified).

    Raises:
        ValueError: a checksum field is malformed or of an unknown algorithm; the message names
            the index (``source``), the chunk, the field and the value.
    """
    missing: list[str] = []
    for number, info in enumerate(chunks):
        if info.extra.get("checksum") is None:
            missing.append(info.filename)
        for key in ("checksum", "plain_checksum"):
            value = info.extra.get(key)
            if value is None or (isinstance(value, str) and _WELL_FORMED.match(value)):
                continue
            where = f"{source}: chunks[{number}] ({info.filename}): {key!r} is {value!r:.80}"
            known = isinstance(value, str) and _ANY_ALGORITHM.match(value)
            if known and known.group(1) != _ALGORITHM:
                raise ValueError(
                    f"{where}, of algorithm {known.group(1)!r}, which this version cannot check (it knows "
                    f"{_ALGORITHM!r}); verify_chunks=True cannot verify the chunk: upgrade litdata, or pass "
                    "verify_chunks=False to read it unverified"
                )
            raise ValueError(
                f"{where}, not '{_ALGORITHM}:' and 16 hex digits; the index is damaged, so verify_chunks=True "
                "cannot verify the chunk: rewrite the dataset (or its index), or pass verify_chunks=False"
            )
    return missing
