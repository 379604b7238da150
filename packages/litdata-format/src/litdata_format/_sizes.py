"""Human byte sizes: "64MB", "1.5GiB", 1 << 26."""

from __future__ import annotations

import re

__all__ = ["format_size", "parse_size"]

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
    "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
}  # fmt: skip
_PATTERN = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | str, *, name: str = "size") -> int:
    """Bytes from an int or a string such as ``"64MB"`` (decimal units) or ``"64MiB"`` (binary).

    ``name`` is the option being parsed, for the error message.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number of bytes or a string like '64MB', not {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
        return value
    # Typed, yet checked: a value from a config file or an untyped caller gets a clear error.
    if isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        match = _PATTERN.match(value)
        if match and match.group(2).lower() in _UNITS:
            size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
            if size > 0:
                return size
    raise ValueError(f"{name}={value!r} is not a size; use a positive int or a string like '64MB' or '1GiB'")


def format_size(size: float) -> str:
    """``size`` bytes in the binary unit that fits it: ``"512 B"``, ``"40.0 MiB"``, ``"1.5 GiB"``."""
    if abs(size) < 1024:
        return f"{size:.0f} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable: the loop returns at TiB")
