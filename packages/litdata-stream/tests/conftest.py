"""Make this folder importable by name, so the datasets in ``stream_views`` reach spawned workers.

pytest imports test modules under names that a fresh interpreter cannot import (the package
folder has a dash), so a dataset class a spawned worker must unpickle lives in ``stream_views``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
