"""Versions of datasets in a cache folder: one subfolder per dataset URL and index.

A dataset rewritten at the same URL keeps its chunk names (``chunk-0-0.bin``) but not their
bytes, and two datasets cached in one folder (``Dir(path=X, url=...)``) may share chunk names
too. So chunks never live directly in a cache folder: each (URL, index) pair gets a subfolder
named from a digest of the URL and the index's bytes (:func:`dataset_version`). A new index at
the same URL is a new subfolder, and the old one is cleared (see ``ChunkCache``). Each subfolder
holds a hidden ``.source-url`` file naming its URL, so the folders of other datasets sharing the
cache folder are told apart and left alone.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from litdata_format import write_file_atomic

__all__ = ["claim_version", "dataset_version", "mark_version"]

_MARKER = ".source-url"
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def dataset_version(url: str, index: bytes) -> str:
    """The cache subfolder of the dataset at ``url`` whose index file holds ``index``.

    Upstream LitData keys its cache on the index's ``updated_at``; a digest of the whole index
    also tells apart indexes that have no ``updated_at`` or were written in the same second,
    and the URL keeps two datasets with byte-identical indexes apart.

    Args:
        url: the dataset's URL (trailing ``/`` ignored).
        index: the bytes of its ``index.json`` (or of whatever identifies its content).
    """
    digest = hashlib.sha256(url.rstrip("/").encode() + b"\0" + index).hexdigest()
    return f"v-{digest[:16]}"


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


def claim_version(cache_dir: Path, version: str, url: str) -> list[Path]:
    """Mark ``cache_dir/version`` as holding ``url``; return the other subfolders holding ``url``.

    Those hold chunks of an index ``url`` no longer has (or another index of it, given with
    ``index_path``). Subfolders of other URLs, and subfolders without a marker, are not returned.
    """
    mark_version(cache_dir / version, url)
    superseded = []
    for entry in os.scandir(cache_dir):
        if entry.name == version or entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            holds = Path(entry.path, _MARKER).read_text()
        except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
            continue
        if holds == url:
            superseded.append(Path(entry.path))
    return superseded
