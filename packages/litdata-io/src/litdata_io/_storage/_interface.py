"""The storage interface every backend implements (local disk, obstore stores, fsspec filesystems).

A :class:`Storage` is rooted at one URL (``s3://bucket/prefix``, ``/data/set``, ...) and takes
keys relative to that root; higher layers depend on this interface only, never on a backend SDK.
Every method has an async twin; the sync ones run the async ones on a per-process background loop
(:mod:`litdata_io._processes._loop`), so they also work inside a running event loop.

Downloads are atomic (a temporary file next to the destination, then ``os.replace``). Objects
larger than ``settings.parallel_threshold`` are fetched with parallel ranged requests.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from litdata_format import checksum_file
from litdata_format.internal import Checksum, atomic_file, write_file_atomic
from litdata_io._processes._loop import run_sync
from litdata_io._storage._failures import ReadOnlyStorageError, StorageError
from litdata_io._storage._secret import Secret
from litdata_io._storage._settings import IOSettings

__all__ = ["ObjectInfo", "Storage", "check_key", "check_page_size"]

_S = TypeVar("_S", bound="Storage")
_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(frozen=True)
class ObjectInfo:
    """What a listing or a head request tells about one object.

    Attributes:
        key: the object's key relative to the storage root (``/``-separated).
        size: its size in bytes.
        etag: an opaque version tag, if the backend has one.
        mtime: the modification time as a POSIX timestamp, if known.
        version: the store's version id of the object, if it has one (a GCS generation).
    """

    key: str
    size: int
    etag: str | None = None
    mtime: float | None = None
    version: str | None = None


def _sync_twin(method: Callable[Concatenate[_S, _P], Coroutine[Any, Any, _R]]) -> Callable[Concatenate[_S, _P], _R]:
    """The sync twin of the async storage ``method``: runs the storage's own (overridden) one on its loop."""
    name = method.__name__

    @functools.wraps(method, assigned=("__module__",), updated=())  # not __isabstractmethod__
    def twin(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return run_sync(getattr(self, name)(*args, **kwargs))

    twin.__name__ = name[1:]
    twin.__qualname__ = f"Storage.{name[1:]}"
    twin.__doc__ = f"Sync twin of :meth:`{name}`."
    return twin


class Storage(ABC):
    """Byte operations on one root URL.

    Implementations must be safe to pickle (no live client in the pickled state: clients are
    created lazily in each process) and must never put secrets in ``repr``, errors or pickles
    beyond what the worker needs to connect.
    """

    #: The root URL this storage was opened for, with no secrets in it.
    url: str
    #: Retry, timeout and parallelism settings.
    settings: IOSettings = IOSettings()
    #: Whether writes (put, upload, delete, copy) are refused.
    read_only: bool = False

    def url_for(self, key: str) -> str:
        """The full URL of ``key``, for messages.

        Args:
            key: the object's key under the root URL.
        """
        return f"{self.url.rstrip('/')}/{key.lstrip('/')}" if key else self.url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    def _secrets(self) -> Sequence[Secret]:
        """Credential values to mask in messages (backends with credentials override this)."""
        return ()

    def _refuse_write(self, what: str, key: str) -> None:
        if self.read_only:
            raise ReadOnlyStorageError(
                f"{what} {self.url_for(key)}: {self.url.split('://')[0]}:// storage is read-only in litdata-io; "
                "write the data somewhere writable (a local folder, s3://, gs://, azure://) and upload it with "
                "the store's own tools"
            )

    # -- async primitives (implement these) -----------------------------------------------------
    @abstractmethod
    async def ahead(self, key: str) -> ObjectInfo:
        """Metadata of ``key``; ``FileNotFoundError`` naming the URL if it does not exist.

        Args:
            key: the object's key under the root URL.
        """

    @abstractmethod
    async def alist(self, prefix: str = "", recursive: bool = True) -> list[ObjectInfo]:
        """Objects whose key starts with ``prefix`` (``""`` = everything), sorted by key.

        With ``recursive=False`` only the objects directly in the folder of ``prefix`` (no ``/``
        in the rest of their key) are listed.

        Args:
            prefix: the start of the keys to list.
            recursive: list the whole tree under the prefix's folder rather than that folder alone.
        """

    async def alist_pages(
        self, prefix: str = "", recursive: bool = True, page_size: int = 1000
    ) -> AsyncIterator[list[ObjectInfo]]:
        """The listing of :meth:`alist`, in pages of at most ``page_size`` objects, in key order.

        Local folders and S3 hold about one page at a time (bounded memory for millions of
        objects); the other backends list everything first.

        Args:
            prefix: the start of the keys to list.
            recursive: list the whole tree under the prefix's folder rather than that folder alone.
            page_size: the most objects in one page.
        """
        check_page_size(page_size)
        found = await self.alist(prefix, recursive)
        for start in range(0, len(found), page_size):
            yield found[start : start + page_size]

    async def alist_page(
        self, prefix: str = "", start_after: str = "", limit: int = 1000
    ) -> tuple[list[ObjectInfo], str]:
        """One page of the recursive listing of ``prefix``: a call that can be repeated statelessly.

        Returns up to ``limit`` objects whose key sorts after ``start_after`` (``""``: from the
        start), and the ``start_after`` of the next page (``""`` when the listing is done). A page
        may be empty while the listing is not done (every key it looked at was outside ``prefix``).

        Args:
            prefix: the start of the keys to list.
            start_after: the cursor the previous page returned.
            limit: the most objects to look at.
        """
        check_page_size(limit)
        found = await self.alist(prefix, True)
        keys = [info.key for info in found]
        start = bisect.bisect_right(keys, start_after) if start_after else 0
        page = found[start : start + limit]
        return page, page[-1].key if start + limit < len(found) else ""

    @abstractmethod
    async def aget(self, key: str) -> bytes:
        """The whole object.

        Args:
            key: the object's key under the root URL.
        """

    @abstractmethod
    async def aget_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object.

        Args:
            key: the object's key under the root URL.
            start: the first byte.
            end: the byte after the last one.
        """

    @abstractmethod
    async def aput(self, key: str, data: bytes) -> None:
        """Create or replace ``key`` with ``data``.

        Args:
            key: the object's key under the root URL.
            data: its new content.
        """

    async def aput_new(self, key: str, data: bytes) -> bool:
        """Create ``key`` with ``data`` only if no object has that key; whether this call created it.

        Of writers racing for one key exactly one succeeds on a local folder (a hard link) and on
        S3, GCS and Azure through obstore (``If-None-Match: *``); this default looks first, then
        writes, so two racing writers may both succeed.

        Args:
            key: the object's key under the root URL.
            data: its content.
        """
        if await self.aexists(key):
            return False
        await self.aput(key, data)
        return True

    async def areplace_if(self, key: str, data: bytes, expected: ObjectInfo) -> bool:
        """Replace ``key`` with ``data`` only if it is still the object ``expected`` describes; whether it did.

        A compare-and-swap: exactly one of racing writers succeeds on a local folder (the file is
        renamed aside first) and on S3, GCS and Azure through obstore (``If-Match``); this default
        looks first, then writes, so two racing writers may both succeed.

        Args:
            key: the object's key under the root URL.
            data: its new content.
            expected: what :meth:`ahead` said of the version to replace (its ``etag``/``version``).
        """
        try:
            current = await self.ahead(key)
        except FileNotFoundError:
            return False
        if (current.etag, current.version, current.size) != (expected.etag, expected.version, expected.size):
            return False
        await self.aput(key, data)
        return True

    @abstractmethod
    async def adelete(self, key: str) -> None:
        """Remove ``key`` (no error if it is already gone).

        Args:
            key: the object's key under the root URL.
        """

    # -- async conveniences (backends may override with something faster) ----------------------
    async def aexists(self, key: str) -> bool:
        """Whether ``key`` exists.

        Args:
            key: the object's key under the root URL.
        """
        try:
            await self.ahead(key)
        except FileNotFoundError:
            return False
        return True

    async def adownload(self, key: str, destination: str | Path) -> int:
        """Write ``key`` to the local file ``destination`` (through a temp name); return its size.

        Args:
            key: the object's key under the root URL.
            destination: the local file to write.
        """
        info = await self.ahead(key)
        if info.size > self.settings.parallel_threshold:
            return await self._download_parts(key, Path(destination), info)
        data = await self.aget(key)
        self._check_size(key, len(data), info.size)
        await asyncio.to_thread(write_file_atomic, Path(destination), data)
        return len(data)

    async def adownload_hashed(self, key: str, destination: str | Path) -> tuple[int, str]:
        """:meth:`adownload`, and the file's checksum (what :func:`litdata_format.checksum_file` gives).

        Backends that receive the object in pieces hash each as it arrives; this default reads the file again.

        Args:
            key: the object's key under the root URL.
            destination: the local file to write (atomically).

        Returns:
            The bytes written and the file's checksum (``"xxh3_64:<hex>"``).
        """
        size = await self.adownload(key, destination)
        return size, await asyncio.to_thread(checksum_file, destination)

    async def aupload(self, source: str | Path, key: str) -> None:
        """Upload the local file ``source`` to ``key``.

        Args:
            source: the local file.
            key: the object's key under the root URL.
        """
        self._refuse_write("PUT", key)
        await self.aput(key, await asyncio.to_thread(Path(source).read_bytes))

    async def acopy(self, src_key: str, dst_key: str) -> None:
        """Copy ``src_key`` to ``dst_key`` within this storage.

        Args:
            src_key: the key to copy.
            dst_key: the key of the copy.
        """
        self._refuse_write("COPY", dst_key)
        await self.aput(dst_key, await self.aget(src_key))

    # -- helpers for backends -------------------------------------------------------------------
    def _check_size(self, key: str, got: int, expected: int) -> None:
        if got != expected:
            # A body cut short without the connection noticing; the caller's retry fetches it again.
            raise ConnectionResetError(f"{self.url_for(key)}: received {got} bytes, expected {expected}")

    async def _download_parts(
        self, key: str, destination: Path, info: ObjectInfo, checksum: Checksum | None = None
    ) -> int:
        """Download ``info.size`` bytes of ``key`` with parallel ranged gets into ``destination``.

        With ``checksum``, each part is hashed as soon as the parts before it were (a part that
        arrives early is kept until then).
        """
        size, part = info.size, self.settings.part_size
        gate = asyncio.Semaphore(self.settings.max_concurrency)
        write_lock = threading.Lock()
        early: dict[int, Any] = {}  # parts received before their turn to be hashed, by offset
        hashed = 0
        with atomic_file(destination, suffix=".part") as handle:
            fd = handle.fileno()

            async def fetch(start: int) -> None:
                nonlocal hashed
                end = min(start + part, size)
                async with gate:
                    data = await self._get_part(key, start, end, info.etag)
                if checksum is not None:
                    early[start] = data
                    while hashed in early:
                        piece = early.pop(hashed)
                        checksum.update(piece)
                        hashed += len(piece)
                await asyncio.to_thread(_pwrite, fd, data, start, write_lock)

            os.ftruncate(fd, size)
            tasks = [asyncio.ensure_future(fetch(start)) for start in range(0, size, part)]
            try:
                done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            finally:
                for task in tasks:
                    task.cancel()
            for task in tasks:  # the first failure, in part order, wins
                if task in done and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            await asyncio.gather(*pending, return_exceptions=True)
        return size

    async def _get_part(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        """One part of a parallel download; backends that can pin the version with ``etag`` do."""
        data = await self.aget_range(key, start, end)
        self._check_size(key, len(data), end - start)
        return data

    def list_pages(self, prefix: str = "", recursive: bool = True, page_size: int = 1000) -> Iterator[list[ObjectInfo]]:
        """Sync twin of :meth:`alist_pages`: each page is fetched when the iteration reaches it."""
        pages = self.alist_pages(prefix, recursive, page_size)
        try:
            while (page := run_sync(_next_page(pages))) is not None:
                yield page
        finally:
            if isinstance(pages, AsyncGenerator):  # close the backend's listing if the caller stopped early
                run_sync(pages.aclose())

    head = _sync_twin(ahead)
    exists = _sync_twin(aexists)
    list = _sync_twin(alist)
    get = _sync_twin(aget)
    get_range = _sync_twin(aget_range)
    put = _sync_twin(aput)
    put_new = _sync_twin(aput_new)
    replace_if = _sync_twin(areplace_if)
    delete = _sync_twin(adelete)
    download = _sync_twin(adownload)
    download_hashed = _sync_twin(adownload_hashed)
    upload = _sync_twin(aupload)
    copy = _sync_twin(acopy)


async def _next_page(pages: AsyncIterator[list[ObjectInfo]]) -> list[ObjectInfo] | None:
    return await anext(pages, None)


def check_page_size(page_size: int) -> None:
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")


def _pwrite(fd: int, data: Any, offset: int, lock: threading.Lock) -> None:
    view = memoryview(data)
    if hasattr(os, "pwrite"):
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
        return
    with lock:  # no pwrite (Windows): seek and write under a lock
        os.lseek(fd, offset, os.SEEK_SET)
        while view:
            view = view[os.write(fd, view) :]


def check_key(url: str, key: str) -> str:
    """``key`` without a leading ``/``, refusing ``..`` segments that would escape the root."""
    key = key.replace("\\", "/").lstrip("/")
    if any(part == ".." for part in key.split("/")):
        raise StorageError(f"{url}: key {key!r} contains '..'; keys are relative paths inside the root", url=url)
    return key
