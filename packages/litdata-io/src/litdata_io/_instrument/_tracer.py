"""Pipeline tracer: one ``key: value;`` event per line, appended to one log by every process.

:func:`enable_tracer` chooses which categories of events are recorded and where; the emitters in
the cache, prefetcher and stream code call :func:`trace_span`, :func:`trace_instant`,
:func:`trace_begin`/:func:`trace_end`, :func:`trace_counter` or :func:`trace_crash`. ``litracer``
turns the log into a Chrome/Perfetto trace.

A line (wrapped here) looks like::

    ts: 1717000000123456.789; pid: 4242; tid: 4250; name: download; ph: X; cat: download; dur: 5120.250;
    chunk: 3; dist_global_rank: 0; dist_world_size: 1; worker_rank: 1; worker_world_size: 4;

``ts`` is wall-clock time in microseconds (Chrome's unit, comparable across processes), ``dur``
the duration of a complete (``ph: X``) event in microseconds, ``pid``/``tid`` the OS process and
thread ids; everything after the fixed keys is the event's ``args``. A value never contains ``;``
or a newline, so every line parses on its own.

Many writers: the file is opened with ``O_APPEND`` and each line goes out unbuffered in one
``write()``, which Linux and macOS apply atomically to a regular file, so lines from workers,
threads and ranks never interleave and a crashing worker loses no events. Off, every emitter is
one ``category in <frozenset>`` test; per-sample sites guard with :func:`trace_enabled`.

Settings reach spawned children through ``LITDATA_LOG_FILE``, ``LITDATA_TRACE_LEVEL`` and
``LITDATA_TRACE_CATEGORIES``, which :func:`enable_tracer` writes and importing this module reads.
Values this module did not write itself (the user's shell, a launcher) override its arguments.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Final, ParamSpec, TypeVar

from litdata_format.internal import read_text
from litdata_io._instrument._switches import SWITCHES
from litdata_io._processes import _process

__all__ = [
    "NO_SPAN",
    "TRACE_CATEGORIES",
    "TRACE_LEVELS",
    "TraceSpan",
    "TracerConfig",
    "enable_tracer",
    "trace_begin",
    "trace_counter",
    "trace_crash",
    "trace_enabled",
    "trace_end",
    "trace_instant",
    "trace_span",
    "traced",
    "tracer_config",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

ENV_LOG_FILE: Final = "LITDATA_LOG_FILE"
ENV_LEVEL: Final = "LITDATA_TRACE_LEVEL"
ENV_CATEGORIES: Final = "LITDATA_TRACE_CATEGORIES"
DEFAULT_LOG_FILE: Final = "litdata_debug.log"

TRACE_LEVELS: Final = ("off", "batch", "chunk", "sample", "debug")
"""Levels from quietest to loudest; each records the categories of the previous one and more."""

TRACE_CATEGORIES: Final[Mapping[str, str]] = {
    "epoch": "batch",
    "batch": "batch",
    "crash": "batch",
    "stall": "batch",
    "download": "chunk",
    "read": "chunk",
    "delete": "chunk",
    "decompress": "chunk",
    "sample": "sample",
    "lock": "debug",
}
"""Every built-in category and the quietest level that records it."""

_FIXED_KEYS: Final = frozenset({"ts", "pid", "tid", "name", "ph", "cat", "dur"})


@dataclass(frozen=True)
class TracerConfig:
    """The tracer's settings in this process.

    Attributes:
        level: One of :data:`TRACE_LEVELS`.
        categories: The categories recorded; empty when tracing is off.
        log_file: Absolute path of the log every process appends to.
    """

    level: str
    categories: frozenset[str]
    log_file: str

    @property
    def enabled(self) -> bool:
        """Whether any event is recorded."""
        return bool(self.categories)


_ACTIVE: frozenset[str] = frozenset()
_CONFIG = TracerConfig("off", frozenset(), os.path.abspath(DEFAULT_LOG_FILE))

_lock = threading.Lock()
_fd: int | None = None  # the descriptor of _CONFIG.log_file once the first event opened it
_fds: dict[str, int] = {}  # never closed: another thread may be writing to a retired one right now
_named_threads: set[int] = set()
_worker_context: str | None = None  # cached once known: a DataLoader worker's identity never changes
_written_env: dict[str, str] = {}  # what this module last wrote, to tell it apart from user overrides
_external_env: dict[str, str] = {}


@_process.on_fork_in_child
def _after_fork_in_child() -> None:
    global _worker_context
    _named_threads.clear()
    _worker_context = None


def _categories_for_level(level: str) -> frozenset[str]:
    rank = TRACE_LEVELS.index(level)  # 0 ("off") records nothing: every category's level is above it
    return frozenset(cat for cat, lvl in TRACE_CATEGORIES.items() if TRACE_LEVELS.index(lvl) <= rank)


def _check_level(level: str, source: str) -> str:
    value = level.strip().lower()
    if value not in TRACE_LEVELS:
        raise ValueError(f"{source}={level!r} is not a tracer level; expected one of {', '.join(TRACE_LEVELS)}")
    return value


def _parse_categories(raw: Iterable[str] | str) -> frozenset[str]:
    parts = raw.split(",") if isinstance(raw, str) else raw
    cats: set[str] = set()
    for part in parts:
        name = str(part).strip().lower()
        if not name:
            continue
        if any(c in name for c in ";:\n\r"):
            raise ValueError(f"tracer category {part!r} may not contain ';', ':' or a newline")
        cats.add(name)
    return frozenset(cats)


def _env_override(var: str) -> str | None:
    """The value of ``var`` if someone other than this module set it (sticky until it is unset)."""
    current = read_text(var)
    if not current:
        _external_env.pop(var, None)
        return None
    if current != _written_env.get(var):
        _external_env[var] = current
    return _external_env.get(var)


def _apply(level: str, categories: frozenset[str], log_file: str) -> TracerConfig:
    global _ACTIVE, _CONFIG, _fd
    if level != "off" and categories:
        # A crash is rare and exactly what one traces for: recorded whenever anything is.
        categories |= {"crash"}
    else:
        categories = frozenset()
    with _lock:
        _fd = _fds.get(log_file)
        _named_threads.clear()  # a new log (or a new run in the old one) needs the names again
        # The tracer's two globals, read on every traced call, are set here and nowhere else.
        _CONFIG = TracerConfig(level, categories, log_file)  # pyright: ignore[reportConstantRedefinition]
        _ACTIVE = categories  # pyright: ignore[reportConstantRedefinition]
        SWITCHES.tracing = bool(categories)
        SWITCHES.update()
    return _CONFIG


def enable_tracer(
    level: str = "chunk",
    *,
    categories: Iterable[str] | None = None,
    log_file: str | os.PathLike[str] = DEFAULT_LOG_FILE,
    flush_interval: float | None = None,
    item_loader: bool | None = None,
    iterating_dataset: bool | None = None,
    getitem_dataset_for_chunk_index: bool | None = None,
) -> TracerConfig:
    """Record LitData's pipeline events in ``log_file``, in this process and the ones it starts.

    Call it once, before creating the DataLoader. The log is appended to: delete an old one first.
    Convert it with ``litracer LOG -o trace.json`` and open the result in https://ui.perfetto.dev.

    Args:
        level: ``"batch"`` (epochs, batches, crashes), ``"chunk"`` (adds download, read, delete,
            decompress), ``"sample"`` (adds one span per sample: high volume), ``"debug"`` (adds
            cache locks) or ``"off"``.
        categories: Record exactly these categories instead of the level's set, e.g.
            ``["download", "read", "delete"]``. Crashes are always recorded while tracing is on.
        log_file: The log every process appends to; stored as an absolute path.
        flush_interval: Accepted for compatibility; lines are written unbuffered.
        item_loader: ``False`` drops the ``sample`` category.
        iterating_dataset: ``False`` drops the ``epoch`` category.
        getitem_dataset_for_chunk_index: ``False`` drops the ``sample`` category.

    Returns:
        The settings now in force, after ``LITDATA_LOG_FILE``, ``LITDATA_TRACE_LEVEL`` and
        ``LITDATA_TRACE_CATEGORIES`` (comma-separated) from the environment have overridden the
        arguments.

    Raises:
        ValueError: ``level`` (or ``LITDATA_TRACE_LEVEL``) is not a level.
    """
    del flush_interval
    env_level = _env_override(ENV_LEVEL)
    env_cats = _env_override(ENV_CATEGORIES)
    env_file = _env_override(ENV_LOG_FILE)

    lvl = _check_level(env_level, ENV_LEVEL) if env_level else _check_level(level, "level")
    if env_cats:
        cats = _parse_categories(env_cats)
    elif categories is not None:
        cats = _parse_categories(categories)
    else:
        cats = _categories_for_level(lvl)
        if item_loader is False or getitem_dataset_for_chunk_index is False:
            cats -= {"sample"}
        if iterating_dataset is False:
            cats -= {"epoch"}
    path: str = os.path.abspath(os.fspath(env_file or log_file))

    config = _apply(lvl, cats, path)
    written = {ENV_LEVEL: lvl, ENV_CATEGORIES: ",".join(sorted(config.categories)), ENV_LOG_FILE: path}
    os.environ.update(written)
    _written_env.update(written)
    return config


def tracer_config() -> TracerConfig:
    """The tracer's settings in this process."""
    return _CONFIG


def _configure_from_env() -> None:
    """Turn tracing on at import when the environment asks for it (how spawned workers join in)."""
    raw_level = read_text(ENV_LEVEL) or ""
    raw_cats = read_text(ENV_CATEGORIES) or ""
    if not raw_level and not raw_cats:
        return
    try:
        level = _check_level(raw_level or "chunk", ENV_LEVEL)
        cats = _parse_categories(raw_cats) if raw_cats else _categories_for_level(level)
    except ValueError as exc:
        warnings.warn(f"litdata tracer stays off: {exc}", RuntimeWarning, stacklevel=2)
        return
    path = os.path.abspath(read_text(ENV_LOG_FILE) or DEFAULT_LOG_FILE)
    _apply(level, cats, path)


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _clean(value: object) -> str:
    if type(value) is int or type(value) is float:
        return str(value)
    return str(value).replace(";", ",").replace("\n", " ").replace("\r", " ")


def _context() -> str:
    """Rank and DataLoader-worker fields appended to every line, looked up without importing torch."""
    global _worker_context
    if _worker_context is not None:
        return _worker_context
    rank, world = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        rank, world = str(dist.get_rank()), str(dist.get_world_size())
    text = f" dist_global_rank: {_clean(rank)}; dist_world_size: {_clean(world)};"
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is None:
        return text
    _worker_context = f"{text} worker_rank: {info.id}; worker_world_size: {info.num_workers};"
    return _worker_context


def _open(path: str) -> int:
    global _fd
    with _lock:
        fd = _fds.get(path)
        if fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            fd = _fds[path] = os.open(path, flags, 0o644)
        if path == _CONFIG.log_file:
            _fd = fd
        return fd


def _emit(name: str, ph: str, cat: str, ts_ns: int, dur_ns: int | None, args: Mapping[str, object]) -> None:
    tid = threading.get_native_id()
    head = f"ts: {_us(ts_ns)}; pid: {_process.pid()}; tid: {tid};"
    parts = [head, f" name: {_clean(name)}; ph: {ph}; cat: {cat};"]
    if dur_ns is not None:
        parts.append(f" dur: {_us(dur_ns)};")
    for key, value in args.items():
        # Never shadow the fixed keys the converter reads.
        parts.append(f" {'arg_' if key in _FIXED_KEYS else ''}{key}: {_clean(value)};")
    if ph != "C":  # a counter's args are its plotted series: no rank/worker fields there
        parts.append(_context())
    parts.append("\n")
    if tid not in _named_threads:
        _named_threads.add(tid)
        # Chrome metadata: lets the trace show "Prefetcher" instead of a bare thread id.
        thread = threading.current_thread().name
        parts.insert(0, f"{head} name: thread_name; ph: M; cat: __metadata; thread_name: {_clean(thread)};\n")
    data = "".join(parts).encode("utf-8", "replace")
    config = _CONFIG
    try:
        fd = _fd if _fd is not None else _open(config.log_file)
        written = os.write(fd, data)
        while written < len(data):  # only on a full disk or a signal; the line may then be torn
            written += os.write(fd, data[written:])
    except OSError as exc:
        _apply("off", frozenset(), config.log_file)
        print(f"[litdata] tracer stopped: cannot write {config.log_file}: {exc}", file=sys.stderr, flush=True)


def trace_enabled(category: str) -> bool:
    """Whether events of ``category`` are recorded; cheap enough to guard per-sample code.

    Args:
        category: An event category (``chunk``, ``sample``, ``download``, ...).
    """
    return category in _ACTIVE


class TraceSpan:
    """A complete (``ph: X``) event, written when the ``with`` block ends.

    On an exception (not ``GeneratorExit``/``KeyboardInterrupt``) the span gets an ``error``
    argument and a ``crash`` instant is written after it with the span's arguments.
    """

    __slots__ = ("_args", "_cat", "_name", "_start", "_ts")

    def __init__(self, name: str, category: str, args: dict[str, object]) -> None:
        self._name = name
        self._cat = category
        self._args = args
        self._ts = 0
        self._start = 0

    def set(self, **args: object) -> None:
        """Add arguments known only inside the block (a byte count, a retry count).

        Args:
            **args: Shown in the trace's args, next to those given when the span began.
        """
        self._args.update(args)

    def __enter__(self) -> TraceSpan:
        self._ts = time.time_ns()
        self._start = time.perf_counter_ns()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        dur = time.perf_counter_ns() - self._start
        failed = exc if isinstance(exc, Exception) else None
        args = self._args
        if failed is not None:
            args = {**args, "error": type(failed).__name__}
        if self._cat in _ACTIVE:
            _emit(self._name, "X", self._cat, self._ts, dur, args)
        if failed is not None:
            trace_crash(failed, **{**self._args, "span": self._name})


class _NoSpan(TraceSpan):
    """What :func:`trace_span` returns when its category is off: does nothing, allocates nothing."""

    __slots__ = ()

    def set(self, **args: object) -> None:
        pass

    def __enter__(self) -> TraceSpan:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


NO_SPAN: Final[TraceSpan] = _NoSpan("", "", {})
"""The span that records nothing (what :func:`trace_span` returns when its category is off)."""


def trace_span(name: str, category: str | None = None, /, **args: object) -> TraceSpan:
    """Time a block as one complete event.

    Used as ``with trace_span("download", "download", chunk=3):``.

    Args:
        name: The event name (stable: download, read, delete, batch, sample, ...).
        category: Its category; defaults to ``name``.
        **args: Shown in the trace's args (chunk/sample indexes, sizes).
    """
    cat = name if category is None else category
    if cat not in _ACTIVE:
        return NO_SPAN
    return TraceSpan(name, cat, args)


def traced(name: str, category: str | None = None, /, **args: object) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a function so each call is a :func:`trace_span` of these arguments (checked per call, not at import)."""
    cat = name if category is None else category

    def decorate(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def wrapper(*a: _P.args, **kw: _P.kwargs) -> _R:
            if cat not in _ACTIVE:
                return fn(*a, **kw)
            with TraceSpan(name, cat, dict(args)):
                return fn(*a, **kw)

        return wrapper

    return decorate


def trace_instant(name: str, category: str | None = None, /, **args: object) -> None:
    """Record a point in time (``ph: I``), e.g. a cache hit or an eviction decision.

    Args:
        name: The event name.
        category: Its category; defaults to ``name``.
        **args: Shown in the trace's args.
    """
    cat = name if category is None else category
    if cat in _ACTIVE:
        _emit(name, "I", cat, time.time_ns(), None, args)


def trace_begin(name: str, category: str | None = None, /, **args: object) -> None:
    """Open a duration (``ph: B``) that :func:`trace_end` closes later in the same thread.

    For spans that do not fit a ``with`` block (reading a chunk across many ``__getitem__``
    calls); litracer pairs B/E per thread and name into complete events.

    Args:
        name: The event name.
        category: Its category; defaults to ``name``.
        **args: Shown in the trace's args.
    """
    cat = name if category is None else category
    if cat in _ACTIVE:
        _emit(name, "B", cat, time.time_ns(), None, args)


def trace_end(name: str, category: str | None = None, /, **args: object) -> None:
    """Close the latest :func:`trace_begin` of ``name`` in this thread.

    Args:
        name: The name given to :func:`trace_begin`.
        category: Its category; defaults to ``name``.
        **args: Shown in the trace's args.
    """
    cat = name if category is None else category
    if cat in _ACTIVE:
        _emit(name, "E", cat, time.time_ns(), None, args)


def trace_counter(name: str, category: str | None = None, /, **values: float) -> None:
    """Record counter values (``ph: C``), e.g. ``trace_counter("cache", "delete", bytes=n)``.

    Args:
        name: The counter's name.
        category: Its category; defaults to ``name``.
        **values: The counted values, by series name.
    """
    cat = name if category is None else category
    if cat in _ACTIVE:
        _emit(name, "C", cat, time.time_ns(), None, values)


def trace_crash(exc: BaseException, /, **args: object) -> None:
    """Record a ``crash`` instant for ``exc``, one line; print the traceback to stderr yourself.

    Call it where an exception ends a thread or process that nobody joins (the prefetch thread);
    spans record their own crashes.

    Args:
        exc: The exception that ended the thread or process.
        **args: Shown in the trace's args.
    """
    if "crash" in _ACTIVE:
        error = f"{type(exc).__name__}: {exc}"
        _emit("crash", "I", "crash", time.time_ns(), None, {**args, "exception": type(exc).__name__, "error": error})


_configure_from_env()
