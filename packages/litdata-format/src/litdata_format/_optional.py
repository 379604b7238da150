"""Optional libraries: imported on first use, or an ImportError naming the extra that installs them."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["import_optional"]


def import_optional(module: str, extra: str, purpose: str) -> Any:
    """``module``, imported; if it is not installed, an ImportError naming ``purpose`` and the install line.

    ``extra`` is the extra of litdata-format that installs it; ``purpose`` says what needs it
    (``"decoding audio"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f'{purpose} needs the {module.split(".", 1)[0]} package: pip install "litdata-format[{extra}]"'
        ) from error
