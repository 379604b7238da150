"""Staging: where a job's files wait before they are published, and the names a job removes itself.

A worker writes each file into its staging folder and publishes it from there
(:meth:`~litdata_prep._output.Output.publish`). For a local output the node's staging folder is
``.litdata-staging-{node_rank}`` inside the output, so publishing is a rename on one filesystem,
and what a killed run left is removed by the next run of that node. For a bucket it is
``litdata-{what}-{pid}-*`` in the temporary directory, and the next job on the machine removes
those whose process is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from litdata_prep._output import PROBE_PREFIX, Output
from litdata_prep._output_lock import process_alive

__all__ = [
    "RAY_STAGING",
    "STAGING_PREFIX",
    "is_staged",
    "make_staging",
    "ray_staging",
    "remove_staging",
    "temp_staging",
    "update_staging",
]

STAGING_PREFIX = ".litdata-staging-"
#: The staging root of a Ray job's attempts in a local output (``rank-{rank}`` each).
RAY_STAGING = f"{STAGING_PREFIX}ray"
# A staging folder in the temporary directory: ``litdata-{what}-{pid of the job}-{random}``.
_TEMP_STAGING = re.compile(r"^litdata-(?:optimize|map|merge_datasets|raydata)-(\d+)-")


def is_staged(key: str) -> bool:
    """Whether ``key`` of an output is in a staging folder or is a write probe: the job that made it removes it."""
    return key.startswith((STAGING_PREFIX, PROBE_PREFIX))


def _in_output(output: Output, name: str) -> Path | None:
    # The one question staging asks of the output: a local output keeps its staging folders inside
    # (publishing is then a rename on one filesystem); a bucket's files wait in the temporary directory.
    return None if output.folder is None else output.folder / name


def make_staging(output: Output, node_rank: int, what: str) -> Path:
    """A fresh local folder for this node's unpublished files (see the module docstring)."""
    folder = _in_output(output, f"{STAGING_PREFIX}{node_rank}")
    if folder is None:
        return temp_staging(what)
    shutil.rmtree(folder, ignore_errors=True)  # left by a run that was killed
    folder.mkdir(parents=True)
    return folder


def remove_staging(output: Output, node_rank: int) -> None:
    """Remove the local staging folder a killed run left in the output folder (if any)."""
    folder = _in_output(output, f"{STAGING_PREFIX}{node_rank}")
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def ray_staging(output: Output) -> Path | None:
    """The staging root the Ray attempts of every node share (in a local output), or None (then each uses its node's).

    None for a bucket: each attempt stages in its node's temporary directory (:func:`temp_staging`).
    """
    return _in_output(output, RAY_STAGING)


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
