"""Publishing files atomically: write beside the target under a temporary name, then rename.

A reader (in any process) sees either no file or the whole file, never a partial one; a
failure leaves nothing behind. Every writer of chunks, indexes and downloads goes through here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_file", "write_file_atomic"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates files readable by their owner only; published files get the usual mode.
_FILE_MODE = 0o666 & ~_umask()


@contextmanager
def atomic_file(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[BinaryIO]:
    """A binary file handle whose content appears at ``path`` only if the block completes.

    Args:
        path: the final name (its folder is created if missing).
        suffix: the temporary file's suffix (``.part`` for downloads, so caches can tell them apart).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_file_atomic(path: str | os.PathLike[str], data: bytes | bytearray | memoryview) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_file(path) as handle:
        handle.write(data)
