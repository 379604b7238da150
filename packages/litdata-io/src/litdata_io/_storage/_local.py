"""A local folder (or a mounted network drive) as a :class:`~litdata_io.Storage`.

Used for plain paths, ``file://`` URLs and ``local:/shared/drive`` (where the cache copies chunks
from the drive to local disk with :meth:`LocalStorage.adownload`). Blocking file calls run in a
worker thread so an event loop that serves other downloads is never stalled by a slow drive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from litdata_format.internal import atomic_file, write_file_atomic
from litdata_io._storage._failures import StorageError
from litdata_io._storage._interface import ObjectInfo, Storage, check_key, check_page_size
from litdata_io._storage._settings import IOSettings

__all__ = ["LocalStorage"]


_COPY_BLOCK = 1 << 20


class LocalStorage(Storage):
    """Objects are files under ``root``; keys are ``/``-separated paths relative to it.

    ``url`` names it in messages (default: the folder's path). Dot-files are left out of listings
    (in a dataset folder they are atomic writes in progress) unless ``hidden``: a writer that owns the
    folder (``optimize``'s output, with its ``.checkpoints/``) lists them, as a bucket lists every key.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        url: str | None = None,
        settings: IOSettings | None = None,
        *,
        hidden: bool = False,
    ) -> None:
        self.root = Path(os.path.abspath(os.path.expanduser(os.fspath(root))))
        self.url = url or str(self.root)
        self.hidden = hidden
        if settings is not None:
            self.settings = settings

    def _path(self, key: str) -> Path:
        return self.root / check_key(self.url, key) if key else self.root

    def _not_found(self, key: str) -> FileNotFoundError:
        return FileNotFoundError(2, f"{self.url_for(key)}: no such file")

    def _info(self, key: str, path: Path) -> ObjectInfo:
        try:
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(key) from None
        if not path.is_file():
            raise self._not_found(key)
        return ObjectInfo(key, stat.st_size, etag=f"{stat.st_mtime_ns:x}-{stat.st_size:x}", mtime=stat.st_mtime)

    async def ahead(self, key: str) -> ObjectInfo:
        path = self._path(key)
        return await asyncio.to_thread(self._info, key, path)

    def _list(self, prefix: str, recursive: bool) -> list[ObjectInfo]:
        prefix = check_key(self.url, prefix)
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        return list(self._walk(base, prefix, recursive))

    def _walk(self, folder: str, prefix: str, recursive: bool) -> Iterator[ObjectInfo]:
        """The files under ``folder`` whose key starts with ``prefix``, in key order, one at a time.

        Depth first, each folder's names sorted with a ``/`` after a subfolder's name: the order a
        sort of all keys gives, holding one folder's names per level instead of the whole tree's.
        """
        path = os.path.join(self.root, folder) if folder else str(self.root)
        names: list[str] = []
        try:
            entries = os.scandir(path)
        except (FileNotFoundError, NotADirectoryError):
            return
        with entries:
            for entry in entries:
                if entry.name.startswith(".") and not self.hidden:
                    continue  # hidden files are temp files of an atomic write in progress
                try:
                    # As os.walk: links to folders are not entered. The type comes with the listing.
                    names.append(entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name)
                except FileNotFoundError:
                    continue  # deleted while listing
        names.sort()
        here = os.path.join(path, "")  # joined by hand below: os.path.join costs ~1 us per file
        for name in names:
            key = f"{folder}/{name}" if folder else name
            if name.endswith("/"):
                if recursive:
                    yield from self._walk(key[:-1], prefix, recursive)
                continue
            if not key.startswith(prefix):
                continue
            try:
                # One stat per file, following links (a link to a file is listed as that file).
                info = os.stat(here + name)
            except (FileNotFoundError, NotADirectoryError):
                continue  # deleted while listing, or a dangling link
            if stat.S_ISREG(info.st_mode):
                yield ObjectInfo(key, info.st_size, etag=f"{info.st_mtime_ns:x}-{info.st_size:x}", mtime=info.st_mtime)

    def list_pages(self, prefix: str = "", recursive: bool = True, page_size: int = 1000) -> Iterator[list[ObjectInfo]]:
        check_page_size(page_size)
        prefix = check_key(self.url, prefix)
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        page: list[ObjectInfo] = []
        for info in self._walk(base, prefix, recursive):
            page.append(info)
            if len(page) == page_size:
                yield page
                page = []
        if page:
            yield page

    async def alist_pages(
        self, prefix: str = "", recursive: bool = True, page_size: int = 1000
    ) -> AsyncIterator[list[ObjectInfo]]:
        pages = self.list_pages(prefix, recursive, page_size)
        while (page := await asyncio.to_thread(next, pages, None)) is not None:
            yield page

    # Sync calls run in the calling thread: a hop to the event loop and back costs more than a
    # local file operation.
    def list(self, prefix: str = "", recursive: bool = True) -> list[ObjectInfo]:
        return self._list(prefix, recursive)

    def get(self, key: str) -> bytes:
        return self._read(key)

    def head(self, key: str) -> ObjectInfo:
        return self._info(key, self._path(key))

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def put(self, key: str, data: bytes) -> None:
        write_file_atomic(self._path(key), data)

    def put_new(self, key: str, data: bytes) -> bool:
        return self._create(self._path(key), data)

    def replace_if(self, key: str, data: bytes, expected: ObjectInfo) -> bool:
        return self._replace(key, data, expected)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    async def alist(self, prefix: str = "", recursive: bool = True) -> list[ObjectInfo]:
        return await asyncio.to_thread(self._list, prefix, recursive)

    def _read(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                if start:
                    handle.seek(start)
                return handle.read() if end is None else handle.read(max(0, end - start))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise self._not_found(key) from None

    async def aget(self, key: str) -> bytes:
        return await asyncio.to_thread(self._read, key)

    async def aget_range(self, key: str, start: int, end: int) -> bytes:
        if start < 0 or end < start:
            raise StorageError(f"GET {self.url_for(key)}: invalid range [{start}, {end})", url=self.url_for(key))
        return await asyncio.to_thread(self._read, key, start, end)

    async def aput(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(write_file_atomic, self._path(key), data)

    async def aput_new(self, key: str, data: bytes) -> bool:
        return await asyncio.to_thread(self._create, self._path(key), data)

    async def areplace_if(self, key: str, data: bytes, expected: ObjectInfo) -> bool:
        return await asyncio.to_thread(self._replace, key, data, expected)

    def _replace(self, key: str, data: bytes, expected: ObjectInfo) -> bool:
        """Rename the file aside (only one of racing writers can), keep it aside if it is ``expected``, then create.

        A file aside that is not ``expected`` (another writer's, new since) is linked back.
        """
        path = self._path(key)
        aside = path.with_name(f".{path.name}.{uuid.uuid4().hex}.aside")
        try:
            os.rename(path, aside)
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:
            if self._info(key, aside).etag != expected.etag:
                with contextlib.suppress(FileExistsError):
                    os.link(aside, path)
                return False
            return self._create(path, data)
        finally:
            aside.unlink(missing_ok=True)

    @staticmethod
    def _create(path: Path, data: bytes) -> bool:
        """Write ``data`` under a temporary name, then hard-link it as ``path`` unless that exists."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".new")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            try:
                os.link(temp, path)  # atomic, and never replaces: exactly one of racing writers wins
            except FileExistsError:
                return False
            return True
        finally:
            os.unlink(temp)

    async def adelete(self, key: str) -> None:
        await asyncio.to_thread(self._path(key).unlink, True)

    def _copy_file(self, source: Path, destination: Path, missing: str) -> int:
        try:
            # O_NONBLOCK: a FIFO must not block the copy waiting for a writer; only files are copied.
            fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(2, f"{missing}: no such file") from None
        reader = os.fdopen(fd, "rb")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            reader.close()
            raise StorageError(
                f"{missing}: not a regular file (a FIFO, device or socket); refusing to copy it", url=missing
            )
        with reader, atomic_file(destination) as out:
            shutil.copyfileobj(reader, out, _COPY_BLOCK)
            return out.tell()

    def _inside(self, key: str) -> Path:
        """The file of ``key``, refused if a symlink takes it out of the folder.

        Copies into a cache must not read files the folder's owner merely linked to.
        """
        path = self._path(key)
        real, root = os.path.realpath(path), os.path.realpath(self.root)
        if os.path.commonpath([root, real]) != root:
            url = self.url_for(key)
            raise StorageError(f"{url}: resolves to {real}, outside {root}; refusing to copy it", url=url)
        return path

    async def adownload(self, key: str, destination: str | Path) -> int:
        return await asyncio.to_thread(self._copy_file, self._inside(key), Path(destination), self.url_for(key))

    async def aupload(self, source: str | Path, key: str) -> None:
        await asyncio.to_thread(self._copy_file, Path(source), self._path(key), str(source))

    async def acopy(self, src_key: str, dst_key: str) -> None:
        await asyncio.to_thread(self._copy_file, self._path(src_key), self._path(dst_key), self.url_for(src_key))

    async def aexists(self, key: str) -> bool:
        return await asyncio.to_thread(self._path(key).is_file)
