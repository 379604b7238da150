"""Make this folder importable by name, so functions in ``prep_fns`` reach spawned workers.

pytest imports test modules under names that a fresh interpreter cannot import (the package
folder has a dash), so the functions handed to ``optimize``/``map`` live in ``prep_fns``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
