"""Make this folder importable by name, so the tests share ``_folder_storage`` (one module, not a copy each).

pytest imports test modules by file (``--import-mode=importlib``), and this folder is not a package.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
