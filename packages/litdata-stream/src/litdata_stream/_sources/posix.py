"""How a local dataset is read: mapped in place, and shuffled globally or in a sliding window.

A dataset in a local folder is mapped in place (no copy into the cache). On a network or
parallel filesystem (NFS, Lustre, GPFS, BeeGFS, PanFS, Vast) a global shuffle turns sequential
reads of big chunk files into random reads, which those filesystems serve badly, so there the
shuffle becomes a window shuffle (``_shuffle.WindowOrder``). Two environment variables decide:

- ``LITDATA_POSIX_FAST=1`` forces the window shuffle on any local folder; ``=0`` turns in-place
  reading off (a local folder is then read through the chunk cache, as a ``local:`` URL is).
- ``LITDATA_POSIX_SHUFFLE_WINDOW`` sets the window (chunks, and samples inside a chunk; default 16).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from litdata_format.internal import read_count, read_flag

__all__ = ["PosixProfile", "detect_posix", "filesystem_of", "posix_fast_setting", "shuffle_window"]

DEFAULT_WINDOW = 16
# Filesystems where random reads of big files cost far more than sequential ones.
_WINDOW_FILESYSTEMS = frozenset({"nfs", "nfs4", "nfs3", "lustre", "gpfs", "panfs", "beegfs", "fuse.vast"})


def posix_fast_setting() -> bool | None:
    """``LITDATA_POSIX_FAST``: True (force), False (off) or None (unset: decide from the filesystem)."""
    return read_flag("LITDATA_POSIX_FAST")


def shuffle_window() -> int:
    """``LITDATA_POSIX_SHUFFLE_WINDOW``: how far the window shuffle may move a chunk or a sample."""
    value = read_count("LITDATA_POSIX_SHUFFLE_WINDOW")
    return DEFAULT_WINDOW if value is None else value


def _unescape(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash in octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_of(path: str, mounts: str | None = None) -> str | None:
    """The filesystem type of the mount holding ``path`` (from ``mounts``, else ``/proc/mounts``), or None."""
    if mounts is None:
        try:
            with open("/proc/mounts", encoding="utf-8") as handle:
                mounts = handle.read()
        except OSError:
            return None
    path = os.path.abspath(path)
    best: tuple[int, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mountpoint = _unescape(fields[1]).rstrip("/") or "/"
        inside = path == mountpoint or path.startswith(mountpoint + "/") or mountpoint == "/"
        if inside and (best is None or len(mountpoint) >= best[0]):
            best = (len(mountpoint), fields[2].lower())
    return None if best is None else best[1]


@dataclass(frozen=True)
class PosixProfile:
    """How a local dataset is read.

    Attributes:
        in_place: chunks are mapped where they lie (False: copied through the chunk cache).
        window: the window shuffle's width, or None for the global shuffle.
        filesystem: the filesystem type found, or ``"forced"`` (``LITDATA_POSIX_FAST=1``).
    """

    in_place: bool
    window: int | None
    filesystem: str | None


def detect_posix(path: str | None, mounts: str | None = None) -> PosixProfile:
    """The profile for a dataset at local ``path`` (None: a URL, always read through the cache)."""
    if path is None:
        return PosixProfile(in_place=False, window=None, filesystem=None)
    setting = posix_fast_setting()
    if setting is False:
        return PosixProfile(in_place=False, window=None, filesystem=filesystem_of(path, mounts))
    if setting is True:
        return PosixProfile(in_place=True, window=shuffle_window(), filesystem="forced")
    fs = filesystem_of(path, mounts)
    window = shuffle_window() if fs in _WINDOW_FILESYSTEMS else None
    return PosixProfile(in_place=True, window=window, filesystem=fs)
