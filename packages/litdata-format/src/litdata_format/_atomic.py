"""Publishing files atomically: write beside the target under a temporary name, then rename.

A reader (in any process) sees either no file or the whole file, never a partial one; a
failure leaves nothing behind. Every writer of chunks, indexes and downloads goes through here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["atomic_file", "temp_target", "write_file_atomic"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates files readable by their owner only; published files get the usual mode.
_FILE_MODE = 0o666 & ~_umask()


# The names ``atomic_file`` gives its temporary files: ``.{name}.{mkstemp's 8 random characters}{suffix}``.
_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.(?:tmp|part)$")


def temp_target(name: str) -> str | None:
    """The file name whose temporary file ``name`` is (as :func:`atomic_file` names them), else None.

    A process killed while writing leaves its temporary file behind; whoever owns the folder's
    files can recognise such leftovers by name and remove them.
    """
    match = _TEMP_NAME.match(name)
    return match["name"] if match else None


@contextmanager
def atomic_file(path: str | os.PathLike[str], suffix: str = ".tmp") -> Generator[BinaryIO, None, None]:
    """A binary file handle whose content appears at ``path`` (its folder made) only if the block completes.

    ``suffix`` is the temporary file's (``.part`` for downloads, so caches can tell them apart).

    Raises:
        OSError: writing failed; its ``filename`` is ``path`` when the system named no file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno is not None and err.filename is None:
            # A failed write (a full disk, a quota) names no file: say which one was being written.
            raise OSError(err.errno, err.strerror or str(err), str(path)) from err
        raise


def write_file_atomic(
    path: str | os.PathLike[str], data: bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]
) -> None:
    """Write ``data`` to ``path`` atomically.

    ``data`` is one buffer, or a list of ``bytes`` written one after the other with gathered writes
    (no copy of them joined in memory).
    """
    # What atomic_file does, in bare system calls: a writer of many small chunks pays this per chunk.
    target = os.fspath(path)
    folder, name = os.path.split(target)
    fd, tmp = _new_temp(folder, name)
    try:
        try:
            os.fchmod(fd, _FILE_MODE)
            if isinstance(data, (bytes, bytearray, memoryview)):
                _write_all(fd, data)
            else:
                _write_parts(fd, list(data))
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.errno is not None and err.filename is None:
            raise OSError(err.errno, err.strerror or str(err), target) from err
        raise


def _write_all(fd: int, data: bytes | bytearray | memoryview[Any]) -> None:
    """Write ``data`` whole (counted in bytes, whatever its format), resuming after a short write."""
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    while view:
        view = view[os.write(fd, view) :]


_NEW_FILE = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL
    | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
)  # fmt: skip


def _new_temp(folder: str, name: str) -> tuple[int, str]:
    """A new file beside ``folder/name``, named as :func:`atomic_file` names them, open for writing (mode 0600).

    The folder is created if missing. The random part comes from ``os.urandom``, so forked writers
    never draw the same names; a name taken already is drawn again.
    """
    made = False
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, _NEW_FILE, 0o600), tmp
        except FileExistsError:
            continue
        except FileNotFoundError:
            if made:
                raise
            os.makedirs(folder or ".", exist_ok=True)
            made = True
    raise FileExistsError(errno.EEXIST, "no free temporary name beside it after 100 tries", os.path.join(folder, name))


_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 16


def _write_parts(fd: int, parts: list[Any]) -> None:
    """Write every buffer of ``parts`` in order with gathered writes, resuming after a short write."""
    if not hasattr(os, "writev"):
        for part in parts:
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view) :]
        return
    start = 0
    while start < len(parts):
        batch = parts[start : start + _IOV_MAX]
        written = os.writev(fd, batch)
        if written == sum(map(len, batch)):
            start += len(batch)
            continue
        for part in batch:  # a short write (a signal, a full disk): go on from where it stopped
            if written < len(part):
                parts[start] = memoryview(part)[written:]
                break
            written -= len(part)
            start += 1
