"""The chunk cache's disk: the byte budget ``max_cache_size`` resolves to, and telling a full disk.

Kept apart from :mod:`litdata_io._cache._chunk_cache` (and light to import) because litdata-stream and
litdata-raw ask "is this error a full disk?" of their own writes into a cache folder too.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
from pathlib import Path

from litdata_format.internal import parse_size

__all__ = ["free_bytes", "is_disk_full", "resolve_max_cache_size"]

_GB = 1000**3
_RESERVE_BYTES = 50 * _GB  # left free for checkpoints when the disk is large enough
_log = logging.getLogger("litdata_io")
_DEFAULT_FRACTION = 0.75
_FRACTION = re.compile(r"^\s*(?:0?\.\d+|[01](?:\.\d*)?)\s*$")


def free_bytes(path: Path) -> int:
    """Free bytes of the disk ``path`` is on (or would be: its nearest existing parent)."""
    probe = path.absolute()
    while not probe.is_dir() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def resolve_max_cache_size(value: int | float | str | None, cache_dir: str | os.PathLike[str] = ".") -> int:
    """The cache budget in bytes.

    Args:
        value: ``None`` = 75% of the free space of the cache's disk, but leaving at least 50 GB free
            when the disk has more than that free; an int or a string such as ``"100GB"`` = that
            many bytes; a float (or a string such as ``"0.9"``) in (0, 1] = that fraction of the
            free space. The environment variable ``MAX_CACHE_SIZE`` overrides it.
        cache_dir: where the cache lives (need not exist yet), to measure its disk.
    """
    env = os.environ.get("MAX_CACHE_SIZE", "").strip()
    source = "max_cache_size"
    if env:
        value, source = env, "MAX_CACHE_SIZE"
    if value is None:
        free = free_bytes(Path(cache_dir))
        budget = int(free * _DEFAULT_FRACTION)
        if free > _RESERVE_BYTES:
            budget = min(budget, free - _RESERVE_BYTES)
        budget = max(budget, 1)
        # As upstream logs it (INFO): the budget a default gave is otherwise invisible.
        _log.info(
            "max_cache_size is unset; using %.1f GB (75%% of free disk, leaving 50 GB free when possible) on %s.",
            budget / 1e9,
            cache_dir,
        )
        return budget
    fraction: float | None = None
    if isinstance(value, float):
        fraction = value
    elif isinstance(value, str) and _FRACTION.match(value) and "." in value:
        fraction = float(value)
    if fraction is not None:
        if not 0 < fraction <= 1:
            raise ValueError(
                f"{source}={value!r}: a fraction of the free disk must be in (0, 1]; "
                "pass a size such as '100GB' for a fixed budget"
            )
        return max(int(free_bytes(Path(cache_dir)) * fraction), 1)
    if isinstance(value, (int, str)):
        return parse_size(value, name=source)
    raise TypeError(f"{source} must be None, a size such as '100GB', or a fraction such as 0.9, not {value!r}")


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error``, or an error it came from, says the disk (or the user's quota on it) is full."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        current = current.__cause__ or current.__context__
    return False
