"""The whole cache, as `litdata cache path|clear` sees it: where it is, and clearing it safely.

Clearing respects the cache's file locks (see ``_locks``): a chunk a process reads and a
download in progress are kept and listed; nothing else of the cache's state is needed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from litdata_io._cache._locks import (
    LEDGER,
    LOCK_SUFFIX,
    STAGING_SUFFIX,
    delete_if_unused,
    lock_exclusive,
    owner_held,
    release_lock_file,
)
from litdata_io._resolver import cache_root

__all__ = ["CacheClearResult", "cache_path", "clear_cache"]


cache_path = cache_root  # the name `litdata cache path` and the public API give it


@dataclass
class CacheClearResult:
    """What :func:`clear_cache` did.

    Attributes:
        path: the folder cleared.
        files: how many files were deleted.
        bytes: how many bytes they held.
        in_use: files kept because a process is reading or downloading them.
    """

    path: Path
    files: int = 0
    bytes: int = 0
    in_use: list[Path] = field(default_factory=list[Path])


def clear_cache(path: str | os.PathLike[str] | None = None) -> CacheClearResult:
    """Delete cached chunks (and index files, and leftovers of crashed downloads) under ``path``.

    Chunks that a process is reading and downloads in progress are kept (and listed in the
    result); no lock file is left behind. Folders left empty are removed, ``path`` included.

    Args:
        path: the folder to clear; default :func:`cache_path`.
    """
    root = Path(path).expanduser() if path is not None else cache_path()
    resolved = root.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise ValueError(f"refusing to clear {root}: it is not a cache folder (set LITDATA_CACHE_DIR or pass a path)")
    result = CacheClearResult(root)
    if not root.is_dir():
        return result
    folders: list[Path] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        folders.append(here)
        # A staging folder belongs to a download: clear it under that chunk's lock, never file by file.
        for name in [d for d in dirs if d.startswith(".") and d.endswith(STAGING_SUFFIX)]:
            dirs.remove(name)
            _clear_staging(here / name, result)
        for name in files:
            _clear_file(here / name, result)
    for folder in reversed(folders):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty
    return result


def _clear_file(path: Path, result: CacheClearResult) -> None:
    name = path.name
    if name == LEDGER:  # bookkeeping, not cached data: the next eviction counts the folder again
        delete_if_unused(path)
        return
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if name.startswith(".") and name.endswith(LOCK_SUFFIX):
        fd = lock_exclusive(path, blocking=False)
        if fd is None:
            result.in_use.append(path)  # a download in progress
            return
        release_lock_file(fd, path)
    elif not delete_if_unused(path):
        if path.exists():
            result.in_use.append(path)
        return
    result.files += 1
    result.bytes += size


def _clear_staging(staging: Path, result: CacheClearResult) -> None:
    # Only a download holding one of the chunk's lock files writes here: take the chunk's lock
    # (no new download starts meanwhile) and keep a folder whose own lock file is still held.
    chunk_name, inode = _staging_owner(staging.name)
    final = staging.parent / chunk_name
    lock_path = staging.parent / f".{chunk_name}{LOCK_SUFFIX}"
    fd = lock_exclusive(lock_path, blocking=False)
    if fd is None or (inode is not None and owner_held(final, inode)):
        result.in_use.append(staging)
        if fd is not None:
            release_lock_file(fd, lock_path)
        return
    try:
        for file in staging.rglob("*"):
            if file.is_file():
                result.files += 1
                result.bytes += file.stat().st_size
        shutil.rmtree(staging, ignore_errors=True)
    finally:
        release_lock_file(fd, lock_path)


def _staging_owner(name: str) -> tuple[str, int | None]:
    """The chunk and lock inode of a staging folder ``.{chunk}.{inode}.partial`` (older: ``.{chunk}.partial``)."""
    stem = name[1 : -len(STAGING_SUFFIX)]
    chunk_name, _, inode = stem.rpartition(".")
    if chunk_name and inode.isdigit():
        return chunk_name, int(inode)
    return stem, None
