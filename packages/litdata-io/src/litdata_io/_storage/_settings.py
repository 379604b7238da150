"""How hard and how wide a storage works: retries, timeouts, parallel ranged downloads.

One :class:`IOSettings` per storage, built from (lowest to highest precedence) the defaults, the
``LITDATA_IO_*`` environment variables and the same names in ``storage_options``. The settings are
plain numbers: they are pickled with the storage, so a worker retries exactly like its parent.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from litdata_format.internal import parse_size, read_count, read_seconds, read_size

__all__ = ["IO_OPTION_NAMES", "IOSettings"]

_MiB = 1024 * 1024


@dataclass(frozen=True)
class IOSettings:
    """Retry, timeout and parallelism settings of one storage, each also read from ``LITDATA_IO_<NAME>``.

    What each one does is in the table of docs/storage.md ("Retries and timeouts").
    """

    max_retries: int = 10
    retry_deadline: float = 180.0
    timeout: float = 30.0
    request_timeout: float = 300.0
    parallel_threshold: int = 32 * _MiB
    part_size: int = 8 * _MiB
    max_concurrency: int = 8
    backoff_base: float = 0.1
    backoff_max: float = 15.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        for name in ("retry_deadline", "timeout", "request_timeout", "backoff_base", "backoff_max"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> IOSettings:
        """Settings from the environment, overridden by ``options`` (only the names of this class)."""
        values: dict[str, Any] = {}
        for name in IO_OPTION_NAMES:
            if options is not None and name in options and options[name] is not None:
                values[name] = _parse(name, options[name], f"storage_options[{name!r}]")
            elif (value := _READERS[name](f"LITDATA_IO_{name.upper()}", environ)) is not None:
                values[name] = value
        return cls(**values)

    def allows_retry(self, attempt: int, elapsed: float, delay: float) -> bool:
        """Whether attempt ``attempt`` (1-based), ``elapsed`` s after the first began, may be retried in ``delay`` s."""
        return attempt <= self.max_retries and elapsed + delay <= self.retry_deadline

    def budget(self) -> str:
        """The retry budget in words, for error messages."""
        return f"max_retries={self.max_retries}, retry_deadline={self.retry_deadline:g}s, timeout={self.timeout:g}s"


IO_OPTION_NAMES: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(IOSettings))
_SIZES = {"parallel_threshold", "part_size"}
_INTS = {"max_retries", "max_concurrency"}
# Each variable checked, and refused naming it, by litdata_format's one reader of the environment.
_READERS: dict[str, Callable[[str, Mapping[str, str] | None], float | None]] = {
    name: read_size if name in _SIZES else read_count if name in _INTS else read_seconds for name in IO_OPTION_NAMES
}


def _parse(name: str, value: Any, source: str) -> int | float:
    try:
        if name in _SIZES:
            return parse_size(value if isinstance(value, int) or not str(value).isdigit() else int(value), name=source)
        if name in _INTS:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError) as exc:
        kind = "a size like '32MiB'" if name in _SIZES else "a whole number" if name in _INTS else "a number of seconds"
        raise ValueError(f"{source}={value!r} is not {kind}") from exc
