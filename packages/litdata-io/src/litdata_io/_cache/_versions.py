"""Versions of datasets in a cache folder: one subfolder per dataset URL and index.

A dataset rewritten at the same URL keeps its chunk names but not their bytes, and two datasets
cached in one folder may share chunk names. So each (URL, index) pair gets a subfolder named from a
digest of both (:func:`dataset_version`); :func:`claim_version` clears the older ones of the URL.
Each subfolder's hidden ``.source-url`` file names its URL, so other datasets' folders are left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from litdata_format.internal import write_file_atomic
from litdata_io._cache._clear import clear_cache
from litdata_io._cache._locks import check_own_folders

__all__ = ["check_version", "claim_version", "dataset_version", "file_version", "mark_version"]

_MARKER = ".source-url"
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def dataset_version(url: str, index: bytes) -> str:
    """The cache subfolder of the dataset at ``url`` whose index file holds ``index``.

    A digest of the whole index, unlike upstream's ``updated_at``, also tells apart indexes written
    in the same second; the URL keeps two datasets with byte-identical indexes apart.

    Args:
        url: the dataset's URL (trailing ``/`` ignored).
        index: the bytes of its ``index.json`` (or of whatever identifies its content).
    """
    return _version(url, [index])


def file_version(url: str, path: str | os.PathLike[str]) -> str:
    """:func:`dataset_version` of the bytes in the file ``path`` (a downloaded index), read a block at a time."""
    with open(path, "rb") as handle:
        return _version(url, iter(lambda: handle.read(_HASH_BLOCK), b""))


def _version(url: str, blocks: Iterable[bytes]) -> str:
    """The version named by the SHA-256 of ``url`` (without a trailing ``/``), a NUL, then ``blocks``."""
    digest = hashlib.sha256(url.rstrip("/").encode() + b"\0")
    for block in blocks:
        digest.update(block)
    return f"v-{digest.hexdigest()[:16]}"


_HASH_BLOCK = 1 << 20


def check_version(version: str) -> str:
    """``version`` if it can name a visible subfolder, else a ValueError naming it."""
    if not _NAME.fullmatch(version):
        raise ValueError(
            f"cache version {version!r} must be one folder name of letters, digits, '.', '_' or '-' "
            "that does not start with '.' (litdata_io.dataset_version makes one)"
        )
    return version


def mark_version(folder: Path, url: str) -> None:
    """Record in ``folder`` that it holds chunks of ``url``."""
    marker = folder / _MARKER
    try:
        if marker.read_text() == url:
            return
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
        pass
    folder.mkdir(parents=True, exist_ok=True)
    write_file_atomic(marker, url.encode())


def claim_version(cache_dir: str | os.PathLike[str], version: str, url: str) -> Path:
    """Make ``cache_dir/version`` the folder of ``url``'s current version; return it.

    The folder is created and marked as holding ``url``. The other folders marked with ``url`` are
    cleared like ``litdata cache clear`` does (files in use stay, and keep their mark); folders of
    other URLs, and folders without a mark, are left alone.

    Args:
        cache_dir: the cache folder (shared by any number of datasets).
        version: the subfolder, as :func:`dataset_version` makes it.
        url: the dataset's URL.
    """
    root = Path(cache_dir)
    folder = root / check_version(version)
    folder.mkdir(parents=True, exist_ok=True)
    check_own_folders(root, folder)
    mark_version(folder, url)
    for entry in os.scandir(root):
        if entry.name == version or entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            holds = Path(entry.path, _MARKER).read_text()
        except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
            continue
        if holds == url:
            # The ledger may count the cleared bytes until its next count: too much, never too little.
            with contextlib.suppress(OSError):
                clear_cache(entry.path)
                if os.path.isdir(entry.path):
                    mark_version(Path(entry.path), url)
    return folder
