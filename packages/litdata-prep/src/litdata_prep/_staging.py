"""Staging: the names of what a job removes itself, and staging folders in the temporary directory.

A worker writes each file into a staging folder and publishes it from there. The output decides
where that folder is (:func:`~litdata_prep._output.make_staging`): inside a local output, a bucket's
in the temporary directory as ``litdata-{what}-{pid}-*``, which the next job on the machine removes
once their process is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

__all__ = [
    "PROBE_PREFIX",
    "RAY_STAGING",
    "STAGING_PREFIX",
    "is_staged",
    "process_alive",
    "process_start",
    "temp_staging",
    "update_staging",
]

#: The object :meth:`~litdata_prep._output.Output.check_writable` creates and removes at once.
PROBE_PREFIX = ".litdata-write-probe-"
#: The staging folder of node ``n`` in a local output is ``{STAGING_PREFIX}{n}``.
STAGING_PREFIX = ".litdata-staging-"
#: The staging root of a Ray job's attempts in a local output (``rank-{rank}`` each).
RAY_STAGING = f"{STAGING_PREFIX}ray"
# A staging folder in the temporary directory: ``litdata-{what}-{pid of the job}-{random}``.
_TEMP_STAGING = re.compile(r"^litdata-(?:optimize|map|merge_datasets|raydata)-(\d+)-")


def is_staged(key: str) -> bool:
    """Whether ``key`` of an output is in a staging folder or is a write probe: the job that made it removes it."""
    return key.startswith((STAGING_PREFIX, PROBE_PREFIX))


def process_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, from /proc), or "" where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            # the command name (field 2) may hold spaces and parentheses: count from its end
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def process_alive(pid: int, started: str = "") -> bool:
    """Whether process ``pid`` of this host runs (and, given ``started``, is the one that started then)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's: it exists
    return not started or process_start(pid) in ("", started)


def temp_staging(what: str) -> Path:
    """A fresh staging folder in the temporary directory, named by this process; killed jobs' are removed first."""
    for path in Path(tempfile.gettempdir()).glob("litdata-*"):
        match = _TEMP_STAGING.match(path.name)
        if match and path.is_dir() and not process_alive(int(match[1])):
            shutil.rmtree(path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"litdata-{what}-{os.getpid()}-"))


def update_staging(dataset: Path) -> Path:
    """A fresh folder inside the local ``dataset`` for the chunks ``dataset_update`` rewrites (then renamed into it)."""
    return Path(tempfile.mkdtemp(prefix=".litdata-update-", dir=dataset))
