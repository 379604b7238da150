"""S3 (and R2), GCS, Azure Blob and HTTP through obstore, the Rust ``object_store`` bindings.

Clients are built in the process that uses them and dropped from pickles. Retries happen in
:mod:`litdata_io._storage._retry` only (obstore's own are off); obstore's timeouts come from
:class:`~litdata_io._storage._settings.IOSettings`.

Fork. obstore's tokio runtime does not survive ``fork()``, so each primitive runs where
:func:`~litdata_io._processes._process.obstore_placement` says: here, or in the obstore helper
process, which receives the call as a :class:`~litdata_io._processes._requests.Request`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import pickle
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import urlsplit

from litdata_format.internal import Checksum, atomic_file
from litdata_io._processes import _process
from litdata_io._processes._process import PerProcess
from litdata_io._processes._requests import (
    Copy,
    Delete,
    Download,
    DownloadHashed,
    Get,
    GetRange,
    Head,
    Listing,
    ListingPage,
    Put,
    PutNew,
    ReplaceIf,
    Request,
    Upload,
)
from litdata_io._storage._aws_config import ca_bundle, endpoint_of, s3_client_config
from litdata_io._storage._interface import ObjectInfo, Storage, check_key, check_page_size
from litdata_io._storage._options import BackendOptions, parse_connection_string
from litdata_io._storage._retry import retry_with_client
from litdata_io._storage._secret import Secret

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
    from types import CoroutineType

__all__ = ["ObstoreStorage"]

_MiB = 1024 * 1024
_AZURE_CREDENTIALS = ("account_key", "sas_key", "token", "client_secret", "skip_signature", "use_emulator")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _import_obstore() -> Any:
    try:
        import obstore

        importlib.import_module("obstore.store")  # reached below as obstore.store
    except ImportError as exc:  # pragma: no cover - the extras install it
        raise ImportError('obstore is not installed: pip install "litdata-io[s3]" (or [gcs], [azure], [http])') from exc
    return obstore


def _meta_info(meta: Any) -> ObjectInfo:
    modified = meta.get("last_modified")
    return ObjectInfo(
        key=meta["path"],
        size=int(meta["size"]),
        etag=meta.get("e_tag"),
        mtime=modified.timestamp() if modified is not None else None,
        version=meta.get("version"),
    )


def _served(
    request: Callable[_P, Request[_R]],
) -> Callable[
    [Callable[Concatenate[ObstoreStorage, _P], Awaitable[_R]]],
    Callable[Concatenate[ObstoreStorage, _P], CoroutineType[Any, Any, _R]],
]:
    """Run the decorated primitive here or, as ``request`` of its own arguments, in the obstore helper."""

    def decorate(
        method: Callable[Concatenate[ObstoreStorage, _P], Awaitable[_R]],
    ) -> Callable[Concatenate[ObstoreStorage, _P], CoroutineType[Any, Any, _R]]:
        @functools.wraps(method)
        async def dispatch(self: ObstoreStorage, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            if _process.obstore_placement() == "here":
                return await method(self, *args, **kwargs)
            from litdata_io._processes._helper import call_in_helper

            call = request(*args, **kwargs)
            # This wrapper is part of the class: it forwards its own methods to the helper process.
            pickled = self._pickled()  # pyright: ignore[reportPrivateUsage]
            return await call_in_helper(pickled, call, self.url_for(call.about()))

        return dispatch

    return decorate


class ObstoreStorage(Storage):
    """An object store reached through obstore."""

    def __init__(self, url: str, options: BackendOptions) -> None:
        self.url = url
        self.options = options
        self.settings = options.settings
        self.read_only = options.provider == "http"
        parts = urlsplit(url)
        self._bucket = parts.netloc
        self._prefix = parts.path.strip("/")
        self._store: PerProcess[Any] = PerProcess()  # live clients stay in their process
        self._blob: bytes | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_blob=None)
        return state

    def _pickled(self) -> bytes:
        """This storage as the helper receives it (pickled once: the helper keeps a client per blob)."""
        if self._blob is None:
            self._blob = pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)
        return self._blob

    def _secrets(self) -> Sequence[Secret]:
        return self.options.secret_values()

    def _client_options(self, endpoint: str | None) -> dict[str, Any]:
        """Client options: the timeouts, the user's, plain http for an ``http://`` endpoint, S3's CA bundle."""
        settings = self.settings
        client: dict[str, Any] = {
            "connect_timeout": timedelta(seconds=settings.timeout),
            "read_timeout": timedelta(seconds=settings.timeout),
            "timeout": timedelta(seconds=settings.request_timeout),
        }
        for name, value in self.options.client.items():
            if name == "default_headers":
                client[name] = {k: v.reveal() if isinstance(v, Secret) else v for k, v in value.items()}
            elif name != "ca_bundle":  # a path: obstore takes the certificates themselves (below)
                client[name] = value
        if str(endpoint or "").startswith("http://"):
            client["allow_http"] = True
        if self.options.provider == "s3" and (roots := ca_bundle(self.options)) is not None:
            client["root_certificate"] = roots
        return client

    def _build(self) -> Any:
        stores = _import_obstore().store
        retry = {"max_retries": 0, "retry_timeout": timedelta(seconds=self.settings.retry_deadline)}
        provider, extra = self.options.provider, {}
        if provider == "http":
            return stores.HTTPStore(self.url, client_options=self._client_options(self.url), retry_config=retry)
        if provider == "s3":
            config, extra["credential_provider"] = s3_client_config(self.options)
            store, endpoint = stores.S3Store, endpoint_of(config)
        elif provider == "gcs":
            config = {k: v for k, v in self.options.merged().items() if k != "project"}
            store, endpoint = stores.GCSStore, config.get("base_url")
        elif provider == "azure":
            config = self.options.merged()
            env_string = os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "")
            if env_string and not any(name in config for name in _AZURE_CREDENTIALS):
                config = {**parse_connection_string(env_string), **config}
            if "msi_endpoint" not in config and not any(
                os.environ.get(f"AZURE_{v}_ENDPOINT") for v in ("MSI", "IDENTITY")
            ):
                # the names Azure's SDKs read (App Service, Cloud Shell); obstore reads only its AZURE_* ones
                sdk_endpoint = os.environ.get("IDENTITY_ENDPOINT") or os.environ.get("MSI_ENDPOINT")
                if sdk_endpoint:
                    config["msi_endpoint"] = sdk_endpoint
            if isinstance(config.get("use_emulator"), str):
                config["use_emulator"] = config["use_emulator"].lower() == "true"
            store, endpoint = stores.AzureStore, config.get("endpoint")
        else:  # pragma: no cover
            raise ValueError(f"{self.url}: obstore does not serve provider {provider!r}")
        client, prefix = self._client_options(endpoint), self._prefix or None
        return store(self._bucket, prefix=prefix, config=config, client_options=client, retry_config=retry, **extra)

    def _client(self) -> Any:
        return self._store.get(self._build)

    async def _call(self, what: str, key: str, attempt: Callable[[], Awaitable[Any]]) -> Any:
        url, secrets = self.url_for(key), self._secrets()
        return await retry_with_client(
            self._store, self._build, attempt, what=what, url=url, settings=self.settings, secrets=secrets
        )

    @_served(Head)
    async def ahead(self, key: str) -> ObjectInfo:
        key = check_key(self.url, key)
        obstore = _import_obstore()
        meta = await self._call("HEAD", key, lambda: obstore.head_async(self._client(), key))
        return _meta_info(meta)

    @_served(Listing)
    async def alist(self, prefix: str = "", recursive: bool = True) -> list[ObjectInfo]:
        prefix = check_key(self.url, prefix)
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else None
        obstore = _import_obstore()

        async def attempt() -> list[ObjectInfo]:
            store = self._client()
            if recursive:
                metas = [meta async for batch in obstore.list(store, folder, chunk_size=1000) for meta in batch]
            else:
                metas = (await obstore.list_with_delimiter_async(store, folder))["objects"]
            return sorted((_meta_info(m) for m in metas if m["path"].startswith(prefix)), key=lambda i: i.key)

        return await self._call("LIST", prefix, attempt)

    async def alist_pages(
        self, prefix: str = "", recursive: bool = True, page_size: int = 1000
    ) -> AsyncIterator[list[ObjectInfo]]:
        check_page_size(page_size)
        if not recursive or self.options.provider != "s3":
            # GCS, Azure and HTTP stores have no "list after this key" request in object_store (it
            # would re-list from the start for every page): one whole listing, handed out in pages.
            async for page in super().alist_pages(prefix, recursive, page_size):
                yield page
            return
        # S3 pages by key (ListObjectsV2 start-after): each page is its own retried request, which
        # also works across the helper process, where a stream could not be kept open.
        cursor = ""
        while True:
            page, cursor = await self.alist_page(prefix, cursor, page_size)
            if page:
                yield page
            if not cursor:
                return

    @_served(ListingPage)
    async def alist_page(
        self, prefix: str = "", start_after: str = "", limit: int = 1000
    ) -> tuple[list[ObjectInfo], str]:
        prefix = check_key(self.url, prefix)
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else None
        obstore = _import_obstore()

        async def attempt() -> tuple[list[ObjectInfo], str]:
            stream = obstore.list(self._client(), folder, offset=start_after or None, chunk_size=limit)
            nothing: list[Any] = []
            metas: list[Any] = await anext(aiter(stream), nothing)
            if not metas:
                return [], ""
            # A short batch is the listing's end (the stream fills each batch up to chunk_size).
            cursor = str(metas[-1]["path"]) if len(metas) >= limit else ""
            return [_meta_info(m) for m in metas if str(m["path"]).startswith(prefix)], cursor

        return await self._call("LIST", prefix, attempt)

    @_served(Get)
    async def aget(self, key: str) -> bytes:
        key = check_key(self.url, key)
        obstore = _import_obstore()

        async def attempt() -> bytes:
            result = await obstore.get_async(self._client(), key)
            data = bytes(await result.bytes_async())
            self._check_size(key, len(data), int(result.meta["size"]))
            return data

        return await self._call("GET", key, attempt)

    @_served(GetRange)
    async def aget_range(self, key: str, start: int, end: int) -> bytes:
        key = check_key(self.url, key)
        if end <= start:
            return b""
        obstore = _import_obstore()

        async def attempt() -> bytes:
            return bytes(await obstore.get_range_async(self._client(), key, start=start, end=end))

        return await self._call("GET", key, attempt)

    @_served(Put)
    async def aput(self, key: str, data: bytes) -> None:
        self._refuse_write("PUT", key)
        key = check_key(self.url, key)
        await self._put(key, data)

    async def _put(self, key: str, payload: Any) -> None:
        obstore = _import_obstore()
        part = max(5 * _MiB, self.settings.part_size)  # S3's smallest multipart part

        async def attempt() -> None:
            await obstore.put_async(
                self._client(), key, payload, chunk_size=part, max_concurrency=self.settings.max_concurrency
            )

        await self._call("PUT", key, attempt)

    @_served(PutNew)
    async def aput_new(self, key: str, data: bytes) -> bool:
        self._refuse_write("PUT", key)
        key = check_key(self.url, key)
        obstore = _import_obstore()

        async def attempt() -> bool:
            try:  # If-None-Match: * (S3, GCS and Azure check it)
                await obstore.put_async(self._client(), key, data, mode="create")
            except Exception as exc:
                if type(exc).__name__ == "AlreadyExistsError":  # obstore's, without importing its exceptions
                    return False
                raise
            return True

        return await self._call("PUT", key, attempt)

    @_served(ReplaceIf)
    async def areplace_if(self, key: str, data: bytes, expected: ObjectInfo) -> bool:
        self._refuse_write("PUT", key)
        key = check_key(self.url, key)
        obstore = _import_obstore()
        # If-Match: the ETag (S3, Azure), or the generation (GCS's version), of the object to replace
        mode = {name: value for name, value in (("e_tag", expected.etag), ("version", expected.version)) if value}
        if not mode:
            raise ValueError(f"replace_if {self.url_for(key)}: the expected object has no ETag or version to match")

        async def attempt() -> bool:
            try:
                await obstore.put_async(self._client(), key, data, mode=mode)
            except Exception as exc:
                if type(exc).__name__ in ("PreconditionError", "NotFoundError"):  # replaced or deleted meanwhile
                    return False
                raise
            return True

        return await self._call("PUT", key, attempt)

    @_served(Delete)
    async def adelete(self, key: str) -> None:
        self._refuse_write("DELETE", key)
        key = check_key(self.url, key)
        obstore = _import_obstore()

        async def attempt() -> None:
            with contextlib.suppress(FileNotFoundError):  # some stores report a missing key
                await obstore.delete_async(self._client(), key)

        await self._call("DELETE", key, attempt)

    @_served(Upload)
    async def aupload(self, source: str | Path, key: str) -> None:
        self._refuse_write("PUT", key)
        key = check_key(self.url, key)
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(2, f"upload to {self.url_for(key)}: no such local file {str(path)!r}")
        await self._put(key, path)

    @_served(Copy)
    async def acopy(self, src_key: str, dst_key: str) -> None:
        self._refuse_write("COPY", dst_key)
        src_key, dst_key = check_key(self.url, src_key), check_key(self.url, dst_key)
        obstore = _import_obstore()
        await self._call("COPY", src_key, lambda: obstore.copy_async(self._client(), src_key, dst_key))

    @_served(Download)
    async def adownload(self, key: str, destination: str | Path) -> int:
        return (await self._download(key, Path(destination), hashed=False))[0]

    @_served(DownloadHashed)
    async def adownload_hashed(self, key: str, destination: str | Path) -> tuple[int, str]:
        size, checksum = await self._download(key, Path(destination), hashed=True)
        assert checksum is not None
        return size, checksum

    async def _download(self, key: str, destination: Path, hashed: bool) -> tuple[int, str | None]:
        key = check_key(self.url, key)
        # One GET both learns the size and, for a small object, streams it to disk: no HEAD first.
        outcome = await self._call("GET", key, lambda: self._stream_to(key, destination, hashed))
        if isinstance(outcome, ObjectInfo):
            checksum = Checksum() if hashed else None
            size = await self._download_parts(key, destination, outcome, checksum)
            return size, checksum.text() if checksum is not None else None
        return outcome

    async def _stream_to(self, key: str, destination: Path, hashed: bool) -> tuple[int, str | None] | ObjectInfo:
        obstore = _import_obstore()
        result = await obstore.get_async(self._client(), key)
        info = _meta_info(result.meta)
        if info.size > self.settings.parallel_threshold:
            del result  # dropping the response closes its connection; the parts are fetched in parallel
            return ObjectInfo(key, info.size, info.etag, info.mtime)
        received = 0
        checksum = Checksum() if hashed else None  # a fresh one per attempt: a retry starts over
        with atomic_file(destination, suffix=".part") as handle:
            async for chunk in result.stream(min_chunk_size=_MiB):
                handle.write(chunk)
                if checksum is not None:
                    checksum.update(chunk)  # while the piece is still in the CPU's cache
                received += len(chunk)
            self._check_size(key, received, info.size)
        return received, checksum.text() if checksum is not None else None

    async def _get_part(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        obstore = _import_obstore()
        # If-Match pins every part to the version the size came from: a concurrent overwrite
        # fails the download (412) instead of stitching two versions into one file.
        options: dict[str, Any] = {"range": (start, end), **({"if_match": etag} if etag else {})}

        async def attempt() -> bytes:
            result = await obstore.get_async(self._client(), key, options=options)  # type: ignore[arg-type]
            data = bytes(await result.bytes_async())
            self._check_size(key, len(data), end - start)
            return data

        return await self._call("GET", key, attempt)
