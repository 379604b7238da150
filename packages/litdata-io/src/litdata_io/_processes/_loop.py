"""Event loops in background threads: the one class for them, and this process's shared loop.

A sync call (``storage.get(key)``) submits the coroutine to the process's loop, running in a
daemon thread, and waits for it, so it works inside a running event loop too (a Jupyter cell).
A loop starts on first use in the process that uses it; a forked child drops its parent's.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from litdata_io._processes import _process

__all__ = ["LoopThread", "io_loop", "run_sync"]

T = TypeVar("T")


class LoopThread:
    """An event loop (uvloop if ``fast`` and installed) running forever in a daemon thread named ``name``."""

    def __init__(self, name: str, fast: bool = False) -> None:
        self.generation = _process.fork_generation()
        self.loop = _new_event_loop() if fast else asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), name=name, daemon=True)
        self.thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        try:
            self.loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()

    def alive(self) -> bool:
        """Whether the loop runs, in this process."""
        return self.generation == _process.fork_generation() and self.thread.is_alive()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop; its future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self, timeout: float) -> None:
        """Cancel the loop's tasks, stop it and wait up to ``timeout`` seconds for the thread."""

        async def cancel_all() -> None:
            current = asyncio.current_task()
            tasks = [task for task in asyncio.all_tasks() if task is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if not self.alive():
            return
        with contextlib.suppress(Exception):
            self.submit(cancel_all()).result(timeout)
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


_lock = threading.Lock()
_runner: LoopThread | None = None


@_process.on_fork_in_child
def _forget_parent_loop() -> None:
    # Dropped, not closed: closing would touch descriptors shared with the parent's loop.
    global _lock, _runner
    _lock = threading.Lock()
    _runner = None


# How long an exiting process that used obstore waits for obstore's own threads to go idle.
_NATIVE_GRACE = 0.05


def _stop_at_exit() -> None:
    # A daemon thread still inside an obstore (Rust) call while the interpreter finalizes aborts it.
    runner = _runner
    if runner is not None:
        runner.stop(timeout=5)
    if "obstore" in sys.modules:
        # obstore's (tokio) threads finish a call a moment after its result reached Python.
        time.sleep(_NATIVE_GRACE)


atexit.register(_stop_at_exit)


def _get_runner() -> LoopThread:
    global _runner
    runner = _runner
    if runner is not None and runner.alive():
        return runner
    with _lock:
        if _runner is None or not _runner.alive():
            _runner = LoopThread("litdata-io-loop", fast=True)
        return _runner


def io_loop() -> asyncio.AbstractEventLoop:
    """This process's shared loop (started on first use), where the obstore helper's connection lives."""
    return _get_runner().loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on this process's litdata-io loop and wait for its result (never from that loop itself)."""
    runner = _get_runner()
    if threading.current_thread() is runner.thread:
        coro.close()
        raise RuntimeError(
            "a sync storage method was called from inside litdata-io's own event loop; await its async twin instead"
        )
    future = runner.submit(coro)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # e.g. KeyboardInterrupt while waiting: do not leave the request running
        raise
