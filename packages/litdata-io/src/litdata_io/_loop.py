"""One background event loop per process, for the sync twins of the async storage methods.

A sync call (``storage.get(key)``) submits the coroutine to a loop running in a daemon thread and
waits for it, so it works the same whether or not the caller is itself inside a running event
loop (a Jupyter cell, an async framework). Nothing is created at import: the loop and its thread
start on the first sync call of each process. A forked child never reuses its parent's loop (its
thread did not survive the fork): the loop is keyed by ``os.getpid()`` and an ``at_fork`` hook
resets the lock that guards it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


class _LoopThread:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="litdata-io-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()


_lock = threading.Lock()
_runner: _LoopThread | None = None


def _after_fork_in_child() -> None:
    # The parent's loop thread does not exist here, and the lock may have been held by a thread
    # that did not survive the fork: start from scratch (the old loop is dropped, not closed,
    # since closing it would touch file descriptors shared with the parent's loop).
    global _lock, _runner
    _lock = threading.Lock()
    _runner = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# How long an exiting process that used obstore waits for obstore's own threads to go idle.
_NATIVE_GRACE = 0.05


def _stop_at_exit() -> None:
    # Stop the loop before the interpreter finalizes: a daemon thread still inside an obstore
    # (Rust) call while Python tears down made the process abort (exit -6) after its work was done.
    runner = _runner
    if runner is not None and runner.pid == os.getpid() and runner.thread.is_alive():
        runner.loop.call_soon_threadsafe(runner.loop.stop)
        runner.thread.join(timeout=5)
    if "obstore" in sys.modules:
        # An async obstore call finishes on obstore's (tokio) threads a moment after its result
        # reached Python; one still finishing when the interpreter finalizes takes the GIL from a
        # finalizing interpreter and the process aborts (-6) or faults (-7). Measured on Azurite,
        # short processes doing one obstore get_async then exiting: 20 of 120 died so; with a 20 ms
        # pause, 0 of 120 (through the sync twins here, about 1 in 20 under load, without a pause).
        time.sleep(_NATIVE_GRACE)


atexit.register(_stop_at_exit)


def _get_runner() -> _LoopThread:
    global _runner
    runner = _runner
    if runner is not None and runner.pid == os.getpid() and runner.thread.is_alive():
        return runner
    with _lock:
        if _runner is None or _runner.pid != os.getpid() or not _runner.thread.is_alive():
            _runner = _LoopThread()
        return _runner


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on this process's litdata-io loop and wait for its result.

    Args:
        coro: the coroutine (of an async storage method).

    Raises:
        RuntimeError: when called from a coroutine already running on that loop (it would wait
            for itself forever); await the async method there instead.
    """
    runner = _get_runner()
    if threading.current_thread() is runner.thread:
        coro.close()
        raise RuntimeError(
            "a sync storage method was called from inside litdata-io's own event loop; await its async twin instead"
        )
    future = asyncio.run_coroutine_threadsafe(coro, runner.loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # e.g. KeyboardInterrupt while waiting: do not leave the request running
        raise
