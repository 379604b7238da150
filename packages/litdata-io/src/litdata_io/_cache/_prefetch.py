"""Prefetch a worker's chunks ahead of its reader, on an asyncio loop in a background thread.

At most ``max_pre_download`` chunks are fetched ahead of the reader, each pinned in the
:class:`~litdata_io.ChunkCache` from its publication until the reader releases it, so prefetching
exceeds the cap by at most ``max_pre_download`` chunks per worker and a prefetched chunk is never
evicted before it is read. The loop thread is started on first use in each process (a forked
DataLoader worker never inherits a dead one). ``LITDATA_ASYNC_CHUNK_PREFETCH=0`` downloads in the
reader's thread instead (useful to debug).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litdata_format import ChunkInfo
from litdata_format.internal import read_count, read_flag
from litdata_io._cache._chunk_cache import ChunkCache
from litdata_io._instrument._probe import probe
from litdata_io._processes._loop import LoopThread
from litdata_io._processes._process import PerProcess

__all__ = ["Prefetcher", "async_prefetch_enabled", "download_concurrency", "min_pre_download"]

_DEFAULT_CONCURRENCY = 8
_DEFAULT_MIN_PRE_DOWNLOAD = 4


def async_prefetch_enabled() -> bool:
    """False when ``LITDATA_ASYNC_CHUNK_PREFETCH`` is ``0``/``false``/``no``/``off``; True otherwise."""
    return read_flag("LITDATA_ASYNC_CHUNK_PREFETCH") is not False


def download_concurrency() -> int:
    """``LITDATA_ASYNC_DOWNLOAD_CONCURRENCY``, default 8: chunk downloads in flight per worker."""
    value = read_count("LITDATA_ASYNC_DOWNLOAD_CONCURRENCY")
    return _DEFAULT_CONCURRENCY if value is None else value


def min_pre_download() -> int:
    """``LITDATA_ASYNC_MIN_PRE_DOWNLOAD``, default 4: the floor of ``max_pre_download`` (0 = none)."""
    value = read_count("LITDATA_ASYNC_MIN_PRE_DOWNLOAD")
    return _DEFAULT_MIN_PRE_DOWNLOAD if value is None else value


_PENDING, _RUNNING, _READY, _DROPPED = "pending", "running", "ready", "dropped"


@dataclass(eq=False)
class _Slot:
    info: ChunkInfo
    state: str = _PENDING
    future: concurrent.futures.Future[Path] = field(default_factory=concurrent.futures.Future[Path])


@dataclass(eq=False)
class _Live:
    """A prefetcher's state in one process: its lock, reading order, loop thread and downloads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    slots: deque[_Slot] = field(default_factory=deque[_Slot])
    runner: LoopThread | None = None
    urgent: list[_Slot] = field(default_factory=list[_Slot])
    active: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set[asyncio.Task[None]])


class Prefetcher:
    """Fetch chunks into ``cache`` ahead of one reader, in the order it will read them.

    Use from one reader thread (a DataLoader worker's main thread)::

        prefetcher.schedule(chunks_of_this_epoch)
        for info in chunks_of_this_epoch:
            path = prefetcher.wait(info)      # pinned: cannot be evicted while read
            ...read path...
            cache.release(info)
            cache.mark_consumed(info)
        prefetcher.close()

    Args:
        cache: where chunks land.
        max_pre_download: how many chunks may be fetched ahead of the reader (raised to
            ``LITDATA_ASYNC_MIN_PRE_DOWNLOAD`` when prefetching is asynchronous).
        concurrency: downloads in flight at once; default ``LITDATA_ASYNC_DOWNLOAD_CONCURRENCY``.
        asynchronous: prefetch in a background thread; default from ``LITDATA_ASYNC_CHUNK_PREFETCH``.
    """

    def __init__(
        self,
        cache: ChunkCache,
        max_pre_download: int = 2,
        *,
        concurrency: int | None = None,
        asynchronous: bool | None = None,
    ) -> None:
        if max_pre_download < 1:
            raise ValueError(f"max_pre_download must be at least 1, got {max_pre_download}")
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.cache = cache
        self.asynchronous = async_prefetch_enabled() if asynchronous is None else asynchronous
        self.max_pre_download = max(max_pre_download, min_pre_download()) if self.asynchronous else max_pre_download
        self.concurrency = download_concurrency() if concurrency is None else concurrency
        self._per_process: PerProcess[_Live] = PerProcess()
        self._closed = False

    def __repr__(self) -> str:
        mode = "async" if self.asynchronous else "sync"
        return f"Prefetcher({self.cache!r}, max_pre_download={self.max_pre_download}, {mode})"

    def __setstate__(self, state: dict[str, Any]) -> None:  # a copy in another process starts afresh, open
        self.__dict__.update(state)
        self._per_process = PerProcess()
        self._closed = False

    @property
    def _now(self) -> _Live:
        return self._per_process.get(_Live)

    def schedule(self, infos: Iterable[ChunkInfo]) -> None:
        """Append chunks to the reading order; the first ``max_pre_download`` start downloading.

        Args:
            infos: the chunks' entries, in reading order.
        """
        with self._now.lock:
            if self._closed:
                raise RuntimeError("this Prefetcher is closed")
            self._now.slots.extend(_Slot(info) for info in infos)
        if self.asynchronous:
            self._kick()

    def wait(self, info: ChunkInfo, timeout: float | None = None) -> Path:
        """Block until ``info`` is in the cache; return its path, acquired for the caller.

        The caller must :meth:`ChunkCache.release` it when done. Chunks scheduled before ``info``
        and not taken yet are skipped (their prefetched copies are released). A chunk that was not
        scheduled is fetched at once.

        Args:
            info: the chunk's entry in the index.
            timeout: seconds to wait at most; None waits as long as the download takes.

        Raises:
            ChunkDownloadError: the download failed (the message names the chunk's URL and the cause).
            TimeoutError: ``timeout`` seconds passed first.
            RuntimeError: the prefetcher is closed.
        """
        name = info.filename
        with self._now.lock:
            if self._closed:
                raise RuntimeError("this Prefetcher is closed")
            position = next((i for i, slot in enumerate(self._now.slots) if slot.info.filename == name), None)
            if position is None:
                slot = _Slot(info)  # not scheduled: fetch it now
            else:
                for _ in range(position):
                    self._drop(self._now.slots.popleft())
                slot = self._now.slots.popleft()
            if not self.asynchronous:
                slot.state = _DROPPED
            elif slot.state == _PENDING:
                self._now.urgent.append(slot)  # the reader waits for it: it goes before the window
        if not self.asynchronous:
            return self.cache.acquire(info)
        self._kick()
        url = self.cache.storage.url_for(name)
        with probe.span("prefetch_wait", "lock", lambda: f"waiting on the prefetcher for {url}"):
            return slot.future.result(timeout)

    def pending(self) -> int:
        """How many scheduled chunks the reader has not taken yet."""
        with self._now.lock:
            return len(self._now.slots)

    def close(self) -> None:
        """Stop prefetching, release what was fetched but not taken, and stop the thread."""
        with self._now.lock:
            self._closed = True
            slots, self._now.slots = [*self._now.slots, *self._now.urgent], deque()
            self._now.urgent = []
            for slot in slots:
                self._drop(slot)
                slot.future.cancel()  # a reader blocked in wait() (another thread) gets CancelledError
            runner, self._now.runner = self._now.runner, None
        if runner is not None:
            runner.stop(timeout=10.0)

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _kick(self) -> None:
        with self._now.lock:
            if self._now.runner is None:
                self._now.runner = LoopThread("litdata-prefetch", fast=True)
            runner = self._now.runner
        with contextlib.suppress(RuntimeError):
            runner.loop.call_soon_threadsafe(self._pump)

    def _pump(self) -> None:
        """On the loop: start what the reader waits for, then the window in order, up to ``concurrency``."""
        with self._now.lock:
            window = [slot for slot, _ in zip(self._now.slots, range(self.max_pre_download))]
            starting: list[_Slot] = []
            for slot in (*self._now.urgent, *window):
                if self._now.active >= self.concurrency:
                    break
                if slot.state == _PENDING:
                    slot.state = _RUNNING
                    self._now.active += 1
                    starting.append(slot)
            self._now.urgent = [slot for slot in self._now.urgent if slot.state == _PENDING]
        loop = asyncio.get_running_loop()
        for slot in starting:
            task = loop.create_task(self._fetch(slot))
            self._now.tasks.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._now.tasks.discard)

    async def _fetch(self, slot: _Slot) -> None:
        try:
            path = await self.cache.aacquire(slot.info)
        except asyncio.CancelledError:
            slot.future.cancel()
            raise
        except BaseException as err:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # cancelled by close()
                slot.future.set_exception(err)
            return
        finally:
            with self._now.lock:
                self._now.active -= 1
            self._pump()
        with self._now.lock:
            dropped = slot.state == _DROPPED
            if not dropped:
                slot.state = _READY
        if dropped:
            self.cache.release(slot.info)
            return
        try:
            slot.future.set_result(path)
        except concurrent.futures.InvalidStateError:  # its reader gave up (close() from another thread)
            self.cache.release(slot.info)

    def _drop(self, slot: _Slot) -> None:
        """Forget a slot the reader will not take (called with the lock held)."""
        ready = slot.state == _READY
        slot.state = _DROPPED
        if ready:
            self.cache.release(slot.info)
