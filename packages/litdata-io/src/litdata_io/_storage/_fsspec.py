"""Any fsspec filesystem as a :class:`~litdata_io.Storage`, and Hugging Face ``hf://`` (read-only).

fsspec serves every scheme obstore does not (``memory://``, ``sftp://``, ...), any scheme with
``storage_options={"backend": "fsspec"}`` (the other options then go to the filesystem untouched),
and ``hf://`` through ``huggingface_hub``'s ``HfFileSystem``. Calls go through fsspec's sync API in a
worker thread (fsspec resets its IO loop after a fork); the filesystem is built in each process.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import importlib
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from litdata_format.internal import atomic_file
from litdata_io._processes._process import PerProcess
from litdata_io._storage._interface import ObjectInfo, Storage, check_key
from litdata_io._storage._options import BackendOptions, is_str_mapping
from litdata_io._storage._retry import retry_with_client
from litdata_io._storage._secret import Secret

__all__ = ["FsspecStorage", "HfStorage"]

T = TypeVar("T")
_COPY_BLOCK = 8 * 1024 * 1024


def _import_fsspec(extra: str) -> Any:
    try:
        import fsspec  # pyright: ignore[reportMissingTypeStubs]

        importlib.import_module("fsspec.core")  # reached below as fsspec.core
    except ImportError as exc:
        raise ImportError(f'this URL needs fsspec: pip install "litdata-io[{extra}]"') from exc
    return fsspec


def _timestamp(info: dict[str, Any]) -> float | None:
    for name in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        value = info.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, str):
            try:
                return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def _etag(info: dict[str, Any]) -> str | None:
    for name in ("ETag", "etag", "md5Hash", "blob_id", "md5"):
        if info.get(name):
            return str(info[name])
    lfs = info.get("lfs")
    if is_str_mapping(lfs) and lfs.get("sha256"):
        return str(lfs["sha256"])
    return None


def _off_google_gcs(fs_url: str, kwargs: dict[str, Any]) -> bool:
    """Whether ``fs_url`` is a gs:// URL served by an endpoint other than Google's (an emulator).

    gcsfs's default class asks the storage-control gRPC API for a bucket's layout, which an emulator
    cannot answer (each call waits out its retries); such endpoints get the plain class.
    """
    endpoint = kwargs.get("endpoint_url")
    if not fs_url.startswith(("gs://", "gcs://")) or not isinstance(endpoint, str) or not endpoint:
        return False
    host = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}").hostname or ""
    return not (host == "googleapis.com" or host.endswith(".googleapis.com"))


class FsspecStorage(Storage):
    """A storage over an fsspec filesystem.

    ``options.config``/``options.secrets`` are the filesystem's kwargs; ``extra`` installs this
    backend (for the error if fsspec is missing); ``fs_url`` is the URL fsspec is given when its
    protocol name differs (``az://`` for ``azure://``).
    """

    def __init__(self, url: str, options: BackendOptions, extra: str = "fsspec", fs_url: str | None = None) -> None:
        self.url = url
        self._fs_url = fs_url or url
        self.options = options
        self.settings = options.settings
        self._extra = extra
        self._fs: PerProcess[tuple[Any, str]] = PerProcess()  # (the filesystem, its root), per process

    def _secrets(self) -> Sequence[Secret]:
        return self.options.secret_values()

    def _open_fs(self) -> tuple[Any, str]:
        fsspec = _import_fsspec(self._extra)
        # Not fsspec's shared instance: a filesystem made anew (after the server refused its keys)
        # must ask the keys' source again, not hand back the instance holding the refused ones.
        kwargs = {**self.options.merged(), "skip_instance_cache": True}
        try:
            if _off_google_gcs(self._fs_url, kwargs):
                plain: Any = importlib.import_module("gcsfs.core").GCSFileSystem
                return plain(**kwargs), self._fs_url.split("://", 1)[1].rstrip("/")  # gs://b/p -> b/p, as fsspec
            return fsspec.core.url_to_fs(self._fs_url, **kwargs)
        except ImportError as exc:
            raise ImportError(f"{self.url}: the fsspec filesystem for this scheme is not installed ({exc})") from None
        except ValueError as exc:
            raise ValueError(
                f"no storage backend for {self.url}: {exc}. Install an fsspec filesystem for it, or register one with "
                "litdata_io.register_storage(scheme, 'module:Class')"
            ) from None

    def _filesystem(self) -> tuple[Any, str]:
        return self._fs.get(self._opened)

    def _opened(self) -> tuple[Any, str]:
        fs, root = self._open_fs()
        return fs, root.rstrip("/")

    def _path(self, key: str) -> str:
        _, root = self._filesystem()
        key = check_key(self.url, key)
        return f"{root}/{key}" if key else root

    def _key(self, path: str) -> str:
        _, root = self._filesystem()
        path = path.lstrip("/") if not root.startswith("/") else path
        return path[len(root) :].lstrip("/") if path.startswith(root) else path

    async def _call(self, what: str, key: str, function: Callable[[], T]) -> T:
        return await retry_with_client(
            self._fs,
            self._opened,
            lambda: asyncio.to_thread(function),
            what=what,
            url=self.url_for(key),
            settings=self.settings,
            secrets=self._secrets(),
            attempt_timeout=self.settings.request_timeout,
        )

    def _info(self, key: str) -> ObjectInfo:
        fs, _ = self._filesystem()
        info = fs.info(self._path(key))
        if info.get("type") == "directory":
            raise FileNotFoundError(2, f"{self.url_for(key)} is a folder, not an object")
        return ObjectInfo(key, int(info.get("size") or 0), _etag(info), _timestamp(info))

    async def ahead(self, key: str) -> ObjectInfo:
        return await self._call("HEAD", key, lambda: self._info(key))

    def _list(self, prefix: str, recursive: bool) -> list[ObjectInfo]:
        fs, root = self._filesystem()
        folder = f"{root}/{prefix.rsplit('/', 1)[0]}" if "/" in prefix else root
        try:
            if recursive:
                entries = list(fs.find(folder, withdirs=False, detail=True).values())
            else:
                entries = [entry for entry in fs.ls(folder, detail=True) if entry.get("type") != "directory"]
        except FileNotFoundError:
            return []
        found: list[ObjectInfo] = []
        for entry in entries:
            key = self._key(entry["name"])
            if key.startswith(prefix) and key:
                found.append(ObjectInfo(key, int(entry.get("size") or 0), _etag(entry), _timestamp(entry)))
        return sorted(found, key=lambda info: info.key)

    async def alist(self, prefix: str = "", recursive: bool = True) -> list[ObjectInfo]:
        prefix = check_key(self.url, prefix)
        return await self._call("LIST", prefix, lambda: self._list(prefix, recursive))

    async def aget(self, key: str) -> bytes:
        path = self._path(key)
        return await self._call("GET", key, lambda: bytes(self._filesystem()[0].cat_file(path)))

    async def aget_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        path = self._path(key)
        return await self._call("GET", key, lambda: bytes(self._filesystem()[0].cat_file(path, start=start, end=end)))

    def _after_write(self) -> None:
        fs, _ = self._filesystem()
        fs.invalidate_cache()

    async def aput(self, key: str, data: bytes) -> None:
        self._refuse_write("PUT", key)
        path = self._path(key)

        def put() -> None:
            self._filesystem()[0].pipe_file(path, bytes(data))
            self._after_write()

        await self._call("PUT", key, put)

    async def adelete(self, key: str) -> None:
        self._refuse_write("DELETE", key)
        path = self._path(key)

        def delete() -> None:
            with contextlib.suppress(FileNotFoundError):
                self._filesystem()[0].rm_file(path)
            self._after_write()

        await self._call("DELETE", key, delete)

    async def acopy(self, src_key: str, dst_key: str) -> None:
        self._refuse_write("COPY", dst_key)
        src, dst = self._path(src_key), self._path(dst_key)

        def copy() -> None:
            self._filesystem()[0].copy(src, dst)
            self._after_write()

        await self._call("COPY", src_key, copy)

    async def aupload(self, source: str | Path, key: str) -> None:
        self._refuse_write("PUT", key)
        path = self._path(key)
        if not Path(source).is_file():
            raise FileNotFoundError(2, f"upload to {self.url_for(key)}: no such local file {str(source)!r}")

        def upload() -> None:
            self._filesystem()[0].put_file(os.fspath(source), path)
            self._after_write()

        await self._call("PUT", key, upload)

    def _fetch_to(self, key: str, destination: Path, expected: int) -> int:
        fs, _ = self._filesystem()
        with atomic_file(destination, suffix=".part") as out, fs.open(self._path(key), "rb") as source:
            shutil.copyfileobj(source, out, _COPY_BLOCK)
            received = out.tell()
            self._check_size(key, received, expected)
        return received

    async def adownload(self, key: str, destination: str | Path) -> int:
        info = await self.ahead(key)
        destination = Path(destination)
        if info.size > self.settings.parallel_threshold:
            return await self._download_parts(key, destination, info)
        return await self._call("GET", key, lambda: self._fetch_to(key, destination, info.size))


class HfStorage(FsspecStorage):
    """A Hugging Face Hub repository folder (``hf://datasets/org/name/path``), read-only.

    Options: ``token`` (else ``HF_TOKEN`` / the saved login), ``endpoint`` (else ``HF_ENDPOINT``),
    ``revision`` (a branch, tag or commit; default the main branch).
    """

    read_only = True

    def _open_fs(self) -> tuple[Any, str]:
        _import_fsspec("hf")
        try:
            from huggingface_hub import HfFileSystem
        except ImportError as exc:
            raise ImportError(f'{self.url} needs huggingface_hub: pip install "litdata-io[hf]"') from exc
        config = self.options.merged()
        kwargs = {name: config[name] for name in ("token", "endpoint") if config.get(name)}
        path = self.url[len("hf://") :]
        revision = config.get("revision")
        if revision:
            kind, org, name, *rest = path.split("/")
            path = "/".join([kind, org, f"{name}@{quote(str(revision), safe='')}", *rest])
        # A fresh instance per process: fsspec's instance cache would share listings across tests.
        return HfFileSystem(skip_instance_cache=True, **kwargs), path
