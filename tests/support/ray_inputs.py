"""The inputs' ``fn`` of tests/test_ray.py's cases, importable without Ray.

The driver (``tests/scripts/ray_job.py``, which imports Ray) hands them to the cluster; the test hands the
same functions to this machine's workers and compares. Kept apart so that collecting the test does
not import Ray (~2.7 CPU-seconds in every pytest process that collects the suite).
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
from PIL import Image

__all__ = ["image", "record", "walks_its_imports"]


def record(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"sample-{i}", "vec": np.arange(i % 7, dtype=np.int32)}


def image(i: int) -> dict[str, Any]:
    pixels = np.full((8, 8, 3), i % 256, dtype=np.uint8)
    return {"i": i, "img": Image.fromarray(pixels)}


MADE_AT_IMPORT = ["an object made when a worker imported this module"]


def walks_its_imports() -> bool:
    """Whether this process's garbage collector walks what it imported before its work (this module's objects)."""
    return any(o is MADE_AT_IMPORT for o in gc.get_objects())
