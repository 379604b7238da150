"""Every ``LITDATA_*`` environment variable: its default, what it accepts, read and checked here.

Each litdata package reads its variables through the ``read_*`` functions below (never
``os.environ``), when a setting is needed rather than at import. Each takes ``name`` (a variable of
:data:`VARIABLES`, the table docs/settings.md shows) and ``environ`` (``os.environ`` by default),
returns None when the variable is unset or blank, and refuses a wrong value with a ValueError
naming the variable, the value and what it accepts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from litdata_format._sizes import parse_size

__all__ = [
    "VARIABLES",
    "Variable",
    "read_choice",
    "read_count",
    "read_flag",
    "read_seconds",
    "read_size",
    "read_text",
]

_Number = TypeVar("_Number", int, float)

_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Variable:
    """One ``LITDATA_*`` variable.

    Attributes:
        name: the variable.
        package: the package that reads it.
        default: its value when unset, as the docs show it.
        accepts: the values it accepts, in words (the error of a wrong value quotes it).
        meaning: what it sets.
        minimum: the least number it accepts (numbers only).
        above: whether the number must be above ``minimum`` rather than at least it.
    """

    name: str
    package: str
    default: str
    accepts: str
    meaning: str
    minimum: float = 0.0
    above: bool = False


def _seconds(name: str, package: str, default: str, meaning: str, zero: str | None = None) -> Variable:
    if zero is None:
        return Variable(name, package, default, "a number of seconds > 0", meaning, 0.0, above=True)
    return Variable(name, package, default, f"a number of seconds >= 0 (0 {zero})", meaning)


def _count(name: str, package: str, default: str, meaning: str, minimum: int) -> Variable:
    return Variable(name, package, default, f"a whole number >= {minimum}", meaning, float(minimum))


def _flag(name: str, package: str, default: str, meaning: str) -> Variable:
    return Variable(name, package, default, "1/true/yes/on or 0/false/no/off", meaning)


_ALL = [
    _flag("LITDATA_ALLOW_PICKLE", "litdata-format", "1", "whether readers may unpickle dataset values"),
    Variable("LITDATA_CACHE_DIR", "litdata-io", "~/.lightning/chunks", "a folder", "where remote datasets are cached"),
    _count("LITDATA_IO_MAX_RETRIES", "litdata-io", "10", "retries after the first attempt of one request", 0),
    _seconds(
        "LITDATA_IO_RETRY_DEADLINE",
        "litdata-io",
        "180",
        "seconds after a request's first attempt past which no retry starts",
    ),
    _seconds("LITDATA_IO_TIMEOUT", "litdata-io", "30", "seconds without progress after which an attempt is retried"),
    _seconds("LITDATA_IO_REQUEST_TIMEOUT", "litdata-io", "300", "seconds one attempt may take in total"),
    Variable(
        "LITDATA_IO_PARALLEL_THRESHOLD",
        "litdata-io",
        "32MiB",
        "a size such as 32MiB or a number of bytes",
        "objects larger than this are downloaded with parallel ranged requests",
    ),
    Variable(
        "LITDATA_IO_PART_SIZE",
        "litdata-io",
        "8MiB",
        "a size such as 8MiB or a number of bytes",
        "bytes per ranged request and per multipart-upload part",
    ),
    _count(
        "LITDATA_IO_MAX_CONCURRENCY", "litdata-io", "8", "ranged requests (or upload parts) in flight per object", 1
    ),
    _seconds("LITDATA_IO_BACKOFF_BASE", "litdata-io", "0.1", "the first backoff between retries (doubled each retry)"),
    _seconds("LITDATA_IO_BACKOFF_MAX", "litdata-io", "15", "the longest backoff between retries"),
    _seconds(
        "LITDATA_DOWNLOAD_STALL_WARN_S",
        "litdata-io",
        "10",
        "seconds a download of another process may make "
        "no progress before a process waiting for it warns, naming the chunk and the process",
        "never warns",
    ),
    _seconds(
        "LITDATA_DOWNLOAD_STALL_S",
        "litdata-io",
        "30",
        "seconds a download of another process (or its hold "
        "on the cache ledger) may make no progress before a waiting process takes it over",
        "waits for ever",
    ),
    _flag(
        "LITDATA_ASYNC_CHUNK_PREFETCH",
        "litdata-io",
        "1",
        "prefetch chunks in a background thread (0: download in the reading thread)",
    ),
    _count("LITDATA_ASYNC_DOWNLOAD_CONCURRENCY", "litdata-io", "8", "chunk downloads in flight per worker", 1),
    _count(
        "LITDATA_ASYNC_MIN_PRE_DOWNLOAD",
        "litdata-io",
        "4",
        "the least max_pre_download when prefetching in the background (0: no floor)",
        0,
    ),
    Variable(
        "LITDATA_OBSTORE_PROCESS",
        "litdata-io",
        "auto",
        "auto, here or helper",
        "where obstore's requests run (here: this process; helper: a helper process)",
    ),
    Variable(
        "LITDATA_MOUNTS",
        "litdata-io",
        "(none)",
        "<mounted folder>=<bucket URL> entries separated by ;",
        "the buckets behind mounted folders",
    ),
    Variable(
        "LITDATA_MOUNTINFO",
        "litdata-io",
        "/proc/self/mountinfo",
        "a file in the mountinfo format",
        "the mount table to read",
    ),
    Variable("LITDATA_LOG_FILE", "litdata-io", "litdata_debug.log", "a file path", "where the tracer writes"),
    Variable("LITDATA_TRACE_LEVEL", "litdata-io", "(off)", "off, chunk, batch, item or all", "what the tracer records"),
    Variable(
        "LITDATA_TRACE_CATEGORIES",
        "litdata-io",
        "(all)",
        "category names separated by commas",
        "the tracer's categories",
    ),
    Variable(
        "LITDATA_FORKSERVER_MAIN",
        "litdata-io",
        "(set by litdata)",
        "set by litdata only",
        "internal: the main module a forkserver preloads",
    ),
    Variable(
        "LITDATA_FORKSERVER_PARENT",
        "litdata-io",
        "(set by litdata)",
        "set by litdata only",
        "internal: the process that started the forkserver",
    ),
    Variable(
        "LITDATA_POSIX_FAST",
        "litdata-stream",
        "(decided by the filesystem)",
        "1/true/yes/on or 0/false/no/off",
        "1 forces the window shuffle on a local folder, 0 turns in-place reads off",
    ),
    _count(
        "LITDATA_POSIX_SHUFFLE_WINDOW",
        "litdata-stream",
        "16",
        "how far the window shuffle may move a chunk or a sample",
        1,
    ),
    Variable(
        "LITDATA_MEMINFO",
        "litdata-stream",
        "/proc/meminfo",
        "a file in the meminfo format",
        "the memory figures read-ahead sizes itself by",
    ),
    _seconds(
        "LITDATA_WATCHDOG_S",
        "litdata-stream",
        "300",
        "seconds the training loop may wait for a batch before the loader reports where its workers are",
        "turns the watchdog off",
    ),
    _count(
        "LITDATA_UPLOAD_BACKLOG",
        "litdata-prep",
        "4",
        "finished files an optimize worker may keep waiting for upload",
        1,
    ),
    _seconds(
        "LITDATA_NODE_MERGE_TIMEOUT",
        "litdata-prep",
        "21600",
        "seconds the last node of a multi-node optimize waits for the other nodes' indexes",
    ),
]
VARIABLES: dict[str, Variable] = {variable.name: variable for variable in _ALL}


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    if name not in VARIABLES:
        raise KeyError(f"{name} is not a LITDATA_* variable listed in litdata_format._environment")
    value = (os.environ if environ is None else environ).get(name, "").strip()
    return value or None


def _refuse(name: str, raw: str) -> ValueError:
    variable = VARIABLES[name]
    return ValueError(
        f"{name}={raw!r} is refused: it takes {variable.accepts} ({variable.meaning}; unset means "
        f"{variable.default}). Set it to such a value, or unset it"
    )


def read_text(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of ``name``, stripped."""
    return _raw(name, environ)


def read_flag(name: str, environ: Mapping[str, str] | None = None) -> bool | None:
    """``name`` as a yes/no (``1/true/yes/on``, ``0/false/no/off``)."""
    raw = _raw(name, environ)
    if raw is None:
        return None
    if raw.lower() in _TRUE | _FALSE:
        return raw.lower() in _TRUE
    raise _refuse(name, raw)


def read_choice(name: str, choices: tuple[str, ...], environ: Mapping[str, str] | None = None) -> str | None:
    """``name`` (lowered) if it is one of ``choices``."""
    raw = _raw(name, environ)
    if raw is None:
        return None
    if raw.lower() in choices:
        return raw.lower()
    raise _refuse(name, raw)


def read_seconds(name: str, environ: Mapping[str, str] | None = None) -> float | None:
    """``name`` as a finite number of seconds within its range."""
    return _read_number(name, environ, float)


def read_count(name: str, environ: Mapping[str, str] | None = None) -> int | None:
    """``name`` as a whole number within its range."""
    return _read_number(name, environ, int)


def _read_number(name: str, environ: Mapping[str, str] | None, parse: Callable[[str], _Number]) -> _Number | None:
    raw = _raw(name, environ)
    if raw is None:
        return None
    try:
        value = parse(raw)
    except ValueError:
        raise _refuse(name, raw) from None
    if not math.isfinite(value) or not _in_range(VARIABLES[name], value):
        raise _refuse(name, raw)
    return value


def read_size(name: str, environ: Mapping[str, str] | None = None) -> int | None:
    """``name`` as a byte size (``"32MiB"``, ``"8MB"`` or a number of bytes)."""
    raw = _raw(name, environ)
    if raw is None:
        return None
    try:
        value = parse_size(int(raw) if raw.isdigit() else raw, name=name)
    except (TypeError, ValueError):
        raise _refuse(name, raw) from None
    if value < 1:
        raise _refuse(name, raw)
    return value


def _in_range(variable: Variable, value: float) -> bool:
    return value > variable.minimum if variable.above else value >= variable.minimum
