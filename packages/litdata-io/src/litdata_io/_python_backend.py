"""A small, fork-safe S3 and HTTP client on ``http.client``: the stand-in for obstore after a fork.

obstore's tokio runtime cannot run in a process forked after the runtime started (the child
hangs). When the DataLoader forks its workers after the main process used obstore (for instance
to read ``index.json``), the workers use this client instead: plain blocking sockets in worker
threads, no background threads or runtimes, so nothing is lost across a fork. It is also
selectable with ``storage_options={"backend": "python"}``.

It speaks path-style (or virtual-hosted) S3 with SigV4 (:mod:`litdata_io._sigv4`) and plain
HTTP(S) GET/HEAD with ranges. Credentials: ``storage_options``, ``AWS_ACCESS_KEY_ID`` & co. in the
environment, or a profile file; instance-role or web-identity credentials need obstore (start the
workers with ``multiprocessing_context="spawn"`` or ``"forkserver"`` to use them).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import threading
import weakref
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from litdata_format import atomic_file
from litdata_io._aws_config import endpoint_of, s3_client_config
from litdata_io._options import BackendOptions
from litdata_io._retry import retry_call
from litdata_io._secret import Secret
from litdata_io._sigv4 import encode_path, encode_query, sign_v4
from litdata_io._storage import ObjectInfo, Storage, check_key

__all__ = ["HTTPStatusError", "PythonStorage"]

T = TypeVar("T")
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_BLOCK = 1024 * 1024


class HTTPStatusError(OSError):
    """A response with an error status; ``status`` drives the retry decision."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(f"status {status} {reason}: {body[:300]}")
        self.status = status


class _Pool:
    """Keep-alive connections, one per (thread, host) of this process, all closed with the storage."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.local = threading.local()
        self.everything: set[http.client.HTTPConnection] = set()

    def get(self, scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
        mine: dict[tuple[str, str, int], http.client.HTTPConnection] = self.local.__dict__.setdefault("pool", {})
        key = (scheme, host, port)
        if key not in mine:
            kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            mine[key] = kind(host, port, timeout=timeout)
            with self.lock:
                self.everything.add(mine[key])
        return mine[key]

    def discard(self, scheme: str, host: str, port: int) -> None:
        connection = self.local.__dict__.get("pool", {}).pop((scheme, host, port), None)
        if connection is not None:
            connection.close()
            with self.lock:
                self.everything.discard(connection)

    def close_all(self) -> None:
        if self.pid != os.getpid():
            return  # a forked child's copy: the sockets belong to the parent
        with self.lock:
            connections, self.everything = self.everything, set()
        for connection in connections:
            connection.close()


class PythonStorage(Storage):
    """S3 (``s3://``, ``r2://``) or HTTP(S) over ``http.client``.

    Args:
        url: the root URL.
        options: the normalized ``storage_options`` (provider ``"s3"`` or ``"http"``).
    """

    def __init__(self, url: str, options: BackendOptions) -> None:
        self.url = url
        self.options = options
        self.settings = options.settings
        self.read_only = options.provider == "http"
        parts = urlsplit(url)
        self._bucket = parts.netloc
        self._prefix = parts.path.strip("/")
        self._pool: _Pool | None = None
        self._config: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_pool=None, _config=None)  # connections and file-read credentials stay here
        return state

    def close(self) -> None:
        """Close this process's idle connections (they are also closed when the storage is collected)."""
        if self._pool is not None:
            self._pool.close_all()

    def _secrets(self) -> Sequence[Secret]:
        return self.options.secret_values()

    # -- plumbing ---------------------------------------------------------------------------------
    def _s3_config(self) -> dict[str, Any]:
        if self._config is None:
            config, _ = s3_client_config(self.options)
            env = os.environ
            for name, var in (("access_key_id", "AWS_ACCESS_KEY_ID"), ("secret_access_key", "AWS_SECRET_ACCESS_KEY")):
                if not config.get(name) and env.get(var):
                    config[name] = env[var]
            if not config.get("session_token") and config.get("access_key_id") == env.get("AWS_ACCESS_KEY_ID"):
                token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN")
                if token:
                    config["session_token"] = token
            region = config.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
            config["region"] = region
            config["endpoint"] = (endpoint_of(config) or f"https://s3.{region}.amazonaws.com").rstrip("/")
            self._config = config
        return self._config

    def _target(self, key: str | None) -> tuple[str, str, int, str]:
        """(scheme, host, port, decoded path) of ``key``; ``None`` is the bucket itself (for listing)."""
        if self.options.provider == "http":
            parts = urlsplit(self.url.rstrip("/") + ("/" + key if key else ""))
            return parts.scheme, parts.hostname or "", parts.port or _default_port(parts.scheme), parts.path or "/"
        config = self._s3_config()
        endpoint = urlsplit(config["endpoint"])
        host = endpoint.hostname or ""
        full = "" if key is None else "/".join(part for part in (self._prefix, key) if part)
        if config.get("virtual_hosted_style_request"):
            host, path = f"{self._bucket}.{host}", f"/{full}"
        else:
            path = f"/{self._bucket}/{full}" if key is not None else f"/{self._bucket}"
        return endpoint.scheme, host, endpoint.port or _default_port(endpoint.scheme), path

    def _connections(self) -> _Pool:
        pool = self._pool
        if pool is None or pool.pid != os.getpid():
            pool = self._pool = _Pool()
            weakref.finalize(self, pool.close_all)
        return pool

    def _request(
        self,
        method: str,
        key: str | None,
        *,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        length: int | None = None,
        sink: Callable[[http.client.HTTPResponse], T] | None = None,
    ) -> tuple[http.client.HTTPResponse, Any]:
        """Send one request and read its response with ``sink`` (default: the whole body)."""
        scheme, host, port, path = self._target(key)
        query = dict(query or {})
        default = port == _default_port(scheme)
        all_headers = {"host": host if default else f"{host}:{port}", **(headers or {})}
        if body is not None or method in ("PUT", "POST"):
            all_headers["content-length"] = str(length if length is not None else len(body or b""))
        if self.options.provider == "s3":
            config = self._s3_config()
            if config.get("access_key_id") and not config.get("skip_signature"):
                all_headers.update(
                    sign_v4(
                        method,
                        path,
                        query,
                        all_headers,
                        access_key=config["access_key_id"],
                        secret_key=config["secret_access_key"],
                        session_token=config.get("session_token"),
                        region=config["region"],
                    )
                )
        else:
            for name, value in self.options.client.get("default_headers", {}).items():
                all_headers[name] = value.reveal() if isinstance(value, Secret) else value
        target = encode_path(path) + (f"?{encode_query(query)}" if query else "")
        pool = self._connections()
        connection = pool.get(scheme, host, port, self.settings.timeout)
        response = None
        try:
            connection.request(method, target, body=body, headers=all_headers)
            response = connection.getresponse()
            if response.status >= 300:
                text = response.read().decode("utf-8", "replace")
                raise HTTPStatusError(response.status, response.reason, text)
            result = sink(response) if sink is not None else response.read()
            if response.will_close:
                pool.discard(scheme, host, port)
            return response, result
        except BaseException as exc:
            if response is not None:
                response.close()  # it may own the socket (a "Connection: close" response)
            pool.discard(scheme, host, port)  # a connection in an unknown state is never reused
            if isinstance(exc, HTTPStatusError) and exc.status == 404:
                raise FileNotFoundError(2, str(exc)) from None
            raise

    async def _call(self, what: str, key: str, function: Callable[[], T]) -> T:
        async def attempt() -> T:
            return await asyncio.to_thread(function)

        return await retry_call(
            attempt, what=what, url=self.url_for(key), settings=self.settings, secrets=self._secrets()
        )

    # -- operations -------------------------------------------------------------------------------
    async def ahead(self, key: str) -> ObjectInfo:
        key = check_key(self.url, key)
        if not key:
            raise FileNotFoundError(2, f"{self.url}: the root is not an object")

        def head() -> ObjectInfo:
            response, _ = self._request("HEAD", key, sink=lambda r: r.read())
            return _info(key, response.headers)

        return await self._call("HEAD", key, head)

    async def alist(self, prefix: str = "", recursive: bool = True) -> list[ObjectInfo]:
        prefix = check_key(self.url, prefix)
        if self.options.provider == "http":
            from litdata_io._errors import StorageError

            raise StorageError(f"LIST {self.url_for(prefix)}: a plain HTTP server cannot list objects", url=self.url)
        root = f"{self._prefix}/" if self._prefix else ""
        folder = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        query = {"list-type": "2", "prefix": root + (prefix if recursive else folder)}
        if not recursive:
            query["delimiter"] = "/"
        found: list[ObjectInfo] = []
        while True:
            page = await self._call("LIST", prefix, lambda q=dict(query): self._request("GET", None, query=q)[1])
            tree = ET.fromstring(page)
            for item in tree.iter(f"{_NS}Contents"):
                key = (item.findtext(f"{_NS}Key") or "")[len(root) :]
                if key.startswith(prefix):
                    modified = item.findtext(f"{_NS}LastModified")
                    found.append(
                        ObjectInfo(
                            key,
                            int(item.findtext(f"{_NS}Size") or 0),
                            item.findtext(f"{_NS}ETag"),
                            _iso_timestamp(modified),
                        )
                    )
            token = tree.findtext(f"{_NS}NextContinuationToken")
            if tree.findtext(f"{_NS}IsTruncated") != "true" or not token:
                return sorted(found, key=lambda info: info.key)
            query["continuation-token"] = token

    async def aget(self, key: str) -> bytes:
        key = check_key(self.url, key)

        def get() -> bytes:
            response, data = self._request("GET", key)
            expected = response.getheader("content-length")
            if expected is not None:
                self._check_size(key, len(data), int(expected))
            return data

        return await self._call("GET", key, get)

    async def aget_range(self, key: str, start: int, end: int) -> bytes:
        key = check_key(self.url, key)
        if end <= start:
            return b""

        def get() -> bytes:
            response, data = self._request("GET", key, headers={"range": f"bytes={start}-{end - 1}"})
            if response.status == 200:  # the server ignored the range
                data = data[start:end]
            return data

        return await self._call("GET", key, get)

    async def aput(self, key: str, data: bytes) -> None:
        self._refuse_write("PUT", key)
        key = check_key(self.url, key)
        await self._call("PUT", key, lambda: self._request("PUT", key, body=bytes(data)))

    async def aupload(self, source: str | Path, key: str) -> None:
        self._refuse_write("PUT", key)
        key = check_key(self.url, key)
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(2, f"upload to {self.url_for(key)}: no such local file {str(path)!r}")

        def upload() -> None:
            with open(path, "rb") as handle:
                self._request("PUT", key, body=handle, length=os.fstat(handle.fileno()).st_size)

        await self._call("PUT", key, upload)

    async def adelete(self, key: str) -> None:
        self._refuse_write("DELETE", key)
        key = check_key(self.url, key)

        def delete() -> None:
            with contextlib.suppress(FileNotFoundError):
                self._request("DELETE", key)

        await self._call("DELETE", key, delete)

    async def acopy(self, src_key: str, dst_key: str) -> None:
        self._refuse_write("COPY", dst_key)
        src_key, dst_key = check_key(self.url, src_key), check_key(self.url, dst_key)
        source = "/" + "/".join(part for part in (self._bucket, self._prefix, src_key) if part)

        def copy() -> None:
            _, body = self._request("PUT", dst_key, headers={"x-amz-copy-source": encode_path(source)})
            if b"<Error>" in body:  # S3 may report a failed copy inside a 200 response
                raise HTTPStatusError(500, "copy failed", body.decode("utf-8", "replace"))

        await self._call("COPY", src_key, copy)

    async def _get_part(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        key = check_key(self.url, key)
        headers = {"range": f"bytes={start}-{end - 1}", **({"if-match": etag} if etag else {})}

        def get() -> bytes:
            _, data = self._request("GET", key, headers=headers)
            self._check_size(key, len(data), end - start)
            return data

        return await self._call("GET", key, get)

    def _fetch_to(self, key: str, destination: Path) -> int:
        with atomic_file(destination, suffix=".part") as out:

            def sink(response: http.client.HTTPResponse) -> int:
                while block := response.read(_BLOCK):
                    out.write(block)
                return out.tell()

            response, received = self._request("GET", key, sink=sink)
            expected = response.getheader("content-length")
            if expected is not None:
                self._check_size(key, received, int(expected))
        return received

    async def adownload(self, key: str, destination: str | Path) -> int:
        key = check_key(self.url, key)
        info = await self.ahead(key)
        destination = Path(destination)
        if info.size > self.settings.parallel_threshold:
            return await self._download_parts(key, destination, info)
        return await self._call("GET", key, lambda: self._fetch_to(key, destination))


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _iso_timestamp(text: str | None) -> float | None:
    if not text:
        return None
    import datetime

    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _info(key: str, headers: Any) -> ObjectInfo:
    modified = headers.get("last-modified")
    try:
        mtime = parsedate_to_datetime(modified).timestamp() if modified else None
    except (TypeError, ValueError):
        mtime = None
    return ObjectInfo(key, int(headers.get("content-length") or 0), headers.get("etag"), mtime)
