"""The upload pipeline of one worker: finished files go to the output while the worker goes on.

A small thread pool publishes each staged file (:meth:`Output.publish`) while the worker goes on; the
files waiting are bounded (``LITDATA_UPLOAD_BACKLOG``, default 4 per worker), so a worker that outruns
the network blocks instead of filling the disk. A JSON record (a checkpoint) is published only after
every file submitted before it, so it never names a chunk that is not in the output yet.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from litdata_format.internal import read_count
from litdata_io.internal import probe
from litdata_prep._output import Output

__all__ = ["Publisher", "upload_backlog"]


def upload_backlog() -> int:
    """How many finished files a worker may keep waiting for upload."""
    value = read_count("LITDATA_UPLOAD_BACKLOG")
    return 4 if value is None else value


class Publisher:
    """Publishes a worker's files to ``output``, ``threads`` at a time; ``backlog`` may wait before a put blocks."""

    def __init__(self, output: Output, threads: int = 2, backlog: int | None = None) -> None:
        self.output = output
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="litdata-upload")
        self._slots = threading.BoundedSemaphore(backlog or upload_backlog())
        self._pending: list[Future[None]] = []
        self._error: BaseException | None = None
        self.uploaded = 0

    def _raise_if_failed(self) -> None:
        self._pending = [f for f in self._pending if not f.done() or self._note(f)]
        if self._error is not None:
            raise self._error

    def _note(self, future: Future[None]) -> bool:
        err = future.exception()
        if err is not None and self._error is None:
            self._error = err
        return False

    def _publish(self, source: str, key: str) -> None:
        with probe.span("upload", "upload", None, key=key):
            self.output.publish(source, key)
        self.uploaded += 1

    def _upload(self, source: str, key: str) -> None:
        try:
            self._publish(source, key)
        finally:
            self._slots.release()

    def put_file(self, source: str | os.PathLike[str], key: str | None = None, now: bool = False) -> None:
        """Publish the staging file ``source`` at ``key`` (default: its file name); it is moved away.

        With ``now``, it is published in this thread once every file submitted before it is: for a
        worker's last files, which it would wait for anyway, no upload thread has to start (starting
        one waits for it to be scheduled, milliseconds on a busy machine, at the end of every job).
        """
        self._raise_if_failed()
        key = key or Path(source).name
        if now:
            wait(self._pending)
            self._raise_if_failed()
            self._publish(str(source), key)
            return
        self._slots.acquire()
        try:
            self._pending.append(self._pool.submit(self._upload, str(source), key))
        except BaseException:
            self._slots.release()
            raise

    def put_json(self, key: str, obj: Any) -> None:
        """Publish ``obj`` at ``key`` once every file submitted so far is in the output."""
        self.after(lambda: self.output.write_json(key, obj))

    def after(self, then: Callable[[], None]) -> None:
        """Run ``then`` in the pool once every file submitted so far is published (not if one failed)."""
        self._raise_if_failed()
        before = list(self._pending)

        def run() -> None:
            wait(before)
            if all(f.exception() is None for f in before):
                then()

        self._pending.append(self._pool.submit(run))

    def close(self) -> None:
        """Wait for every upload; raise the first failure."""
        try:
            wait(self._pending)
            for future in self._pending:
                self._note(future)
        finally:
            self._pool.shutdown(wait=True)
        self._pending = []
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        """Stop without waiting for queued uploads (the job failed anyway)."""
        for future in self._pending:
            future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
