"""One call per instrumented site, fanned out to the tracer, the watchdog's activity board and listeners.

A site (reading a chunk, a download, a lock wait, a batch a worker made) makes one call on
:data:`probe`: ``begin``/``end`` around an operation that does not fit a ``with`` block, ``span``
around one that does, ``instant`` for a point in time. The probe hands it to the tracer (when the
category is recorded), the activity board (when the site says what it is ``doing`` and a board is
attached) and listeners (:meth:`Probe.listen`: the loader's profiler). Off, every call reads one
flag (``SWITCHES.quiet``) and returns; the probe only observes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from litdata_io._instrument import _activity, _tracer
from litdata_io._instrument._switches import SWITCHES

__all__ = ["Listener", "Probe", "Token", "probe"]

# What a site says it does, for the activity board: the text, or a function building it (only when shown).
Doing = str | Callable[[], str] | None


class Listener(Protocol):
    """Told of every event the probe records (the loader's profiler listens for ``worker_batch``)."""

    def event(self, name: str, phase: str, args: Mapping[str, object]) -> None:
        """Event ``name`` with the site's ``args``; ``phase``: ``B`` begins, ``E`` ends, ``X`` span, ``I`` instant."""
        ...


@dataclass(frozen=True, slots=True)
class Token:
    """An operation :meth:`Probe.begin` started, for :meth:`Probe.end` (None when nothing listened)."""

    name: str
    category: str
    args: dict[str, object]
    traced: bool
    activity: int


def _text(doing: Doing) -> str:
    return doing if isinstance(doing, str) else doing() if doing is not None else ""


class Probe:
    """The one instrumentation call of every site (see the module's docstring); use :data:`probe`."""

    __slots__ = ()

    def begin(self, name: str, category: str, doing: Doing = None, /, **args: object) -> Token | None:
        """Operation ``name`` (tracer ``category``, event ``args``) starts; :meth:`end` closes it in this thread.

        ``doing`` is what the activity board shows while it lasts. Returns what :meth:`end` takes
        (None when nothing listens).
        """
        if SWITCHES.quiet:
            return None
        traced = _tracer.trace_enabled(category)
        if traced:
            _tracer.trace_begin(name, category, **args)
        token = _activity.activity_begin(_text(doing)) if doing is not None and SWITCHES.activity else 0
        for listener in SWITCHES.listeners:
            listener.event(name, "B", args)
        if not traced and not token and not SWITCHES.listeners:
            return None
        return Token(name, category, args, traced, token)

    def end(self, token: Token | None) -> None:
        """The operation :meth:`begin` returned ``token`` for has ended."""
        if token is None:
            return
        if token.traced:
            _tracer.trace_end(token.name, token.category, **token.args)
        if token.activity:
            _activity.activity_end(token.activity)
        for listener in SWITCHES.listeners:
            listener.event(token.name, "E", token.args)

    def span(
        self, name: str, category: str, doing: Doing = None, /, **args: object
    ) -> contextlib.AbstractContextManager[_tracer.TraceSpan]:
        """Time a block as one complete event, shown on the activity board (``doing``) while it runs.

        ``with probe.span("download", "download", f"download {url}", chunk=name) as span:``;
        ``span.set(bytes=n)`` adds arguments known only inside the block.
        """
        if SWITCHES.quiet or (
            not SWITCHES.listeners and (doing is None or not SWITCHES.activity) and not _tracer.trace_enabled(category)
        ):
            return _tracer.NO_SPAN
        return self._span(name, category, doing, args)

    @contextlib.contextmanager
    def _span(
        self, name: str, category: str, doing: Doing, args: dict[str, object]
    ) -> Generator[_tracer.TraceSpan, None, None]:
        token = _activity.activity_begin(_text(doing)) if doing is not None and SWITCHES.activity else 0
        span = _tracer.trace_span(name, category, **args)
        try:
            with span:
                yield span
        finally:
            if token:
                _activity.activity_end(token)
            for listener in SWITCHES.listeners:
                listener.event(name, "X", args)

    def instant(self, name: str, category: str, /, **args: object) -> None:
        """A point in time (a batch made, a damaged chunk refetched, a lock taken over)."""
        if SWITCHES.quiet:
            return
        _tracer.trace_instant(name, category, **args)
        for listener in SWITCHES.listeners:
            listener.event(name, "I", args)

    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` of every event from now on, in this process (until :meth:`unlisten`)."""
        SWITCHES.listeners = (*SWITCHES.listeners, listener)
        SWITCHES.update()

    def unlisten(self, listener: Listener) -> None:
        """Stop telling ``listener`` (a no-op when it is not listening)."""
        SWITCHES.listeners = tuple(x for x in SWITCHES.listeners if x is not listener)
        SWITCHES.update()


probe: Final = Probe()
"""The probe every instrumented site calls."""
