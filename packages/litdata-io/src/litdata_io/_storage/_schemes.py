"""Which backend serves which URL scheme, loaded only when a URL of that scheme is opened.

Built-in schemes map to ``"module:attribute"`` strings, so ``import litdata_io`` imports no backend:
s3/r2/gs/azure/http(s) -> obstore (or fsspec with ``storage_options["backend"]``), hf ->
``huggingface_hub``, local paths -> :class:`~litdata_io._storage._local.LocalStorage`, anything else
-> fsspec. Third parties add schemes with :func:`register_storage` or an entry point in the
``litdata.storage`` group; a factory is called as ``factory(url, storage_options=..., session_options=...)``.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from litdata_io._resolver import Dir, resolve_dir
from litdata_io._storage._interface import Storage
from litdata_io._storage._options import normalize_options

__all__ = ["StorageFactory", "get_storage", "open_builtin", "register_storage", "registered_schemes"]

StorageFactory = Callable[..., Storage]
_Target = str | StorageFactory

_BUILTIN = "litdata_io._storage._schemes:open_builtin"
_registry: dict[str, _Target] = {
    scheme: _BUILTIN for scheme in ("s3", "r2", "gs", "azure", "http", "https", "hf", "local", "file")
}
_lock = threading.Lock()
_FSSPEC_NAMES = {"azure": "az", "r2": "s3"}  # our scheme -> the fsspec protocol serving it
_EXTRAS = {"s3": "s3", "r2": "r2", "gs": "gcs", "azure": "azure", "http": "http", "https": "http", "hf": "hf"}


def register_storage(scheme: str, target: str | StorageFactory, *, overwrite: bool = False) -> None:
    """Serve ``scheme://`` URLs with ``target``.

    Args:
        scheme: the URL scheme, e.g. ``"myfs"``.
        target: a factory (a :class:`~litdata_io.Storage` subclass or a function) called as
            ``target(url, storage_options=..., session_options=...)``, or its ``"module:attribute"``
            path, imported on first use.
        overwrite: replace an existing registration (built-in ones included).

    Raises:
        ValueError: the scheme is registered already and ``overwrite`` is False.
    """
    scheme = scheme.lower().rstrip(":/")
    with _lock:
        if scheme in _registry and not overwrite and _registry[scheme] != target:
            raise ValueError(f"storage scheme {scheme!r} is registered already; pass overwrite=True to replace it")
        _registry[scheme] = target


def registered_schemes() -> list[str]:
    """The schemes with a registered backend (fsspec serves others if it knows them)."""
    return sorted(_registry)


def _load(target: _Target) -> StorageFactory:
    if callable(target):
        return target
    module_name, _, attribute = target.partition(":")
    if not attribute:
        raise ValueError(f"storage target {target!r} must look like 'package.module:Factory'")
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def _entry_point(scheme: str) -> _Target | None:
    from importlib.metadata import entry_points

    for entry in entry_points(group="litdata.storage"):
        if entry.name == scheme:
            return entry.value
    return None


def _need(module: str, scheme: str) -> None:
    if importlib.util.find_spec(module) is None:
        extra = _EXTRAS.get(scheme, "fsspec")
        raise ImportError(f'{scheme}:// URLs need {module}, which is not installed: pip install "litdata-io[{extra}]"')


def _check_fsspec_protocol(scheme: str) -> None:
    """Fail at open time, not at first use, when fsspec has no filesystem for ``scheme``."""
    from fsspec.registry import known_implementations, registry  # pyright: ignore[reportMissingTypeStubs]

    if scheme in registry:
        return
    known = known_implementations.get(scheme)
    if known is None:
        raise ValueError(
            f"no storage backend for {scheme}:// URLs: register one with litdata_io.register_storage("
            f"{scheme!r}, 'package.module:Factory'), or install an fsspec filesystem that provides {scheme}://"
        )
    module = str(known["class"]).rsplit(".", 1)[0]
    if importlib.util.find_spec(module.split(".")[0]) is None:
        hint = known.get("err") or f"install the package that provides {module}"
        raise ImportError(f"{scheme}:// URLs need {module}, which is not installed: {hint}")


def _move_userinfo_to_header(
    url: str, storage_options: Mapping[str, Any] | None
) -> tuple[str, Mapping[str, Any] | None]:
    """``https://user:password@host/path`` -> the URL without them, and a Basic auth header (kept secret)."""
    parts = urlsplit(url)
    if not parts.username:
        return url, storage_options
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    options = dict(storage_options or {})
    headers = dict(options.get("headers") or {})
    headers.setdefault("Authorization", "Basic " + base64.b64encode(pair.encode()).decode())
    options["headers"] = headers
    return urlunsplit(parts._replace(netloc=netloc)), options


def open_builtin(
    url: str, storage_options: Mapping[str, Any] | None = None, session_options: Mapping[str, Any] | None = None
) -> Storage:
    """Open a built-in scheme (or any fsspec protocol) with the backend ``storage_options`` asks for."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ("local" if url.startswith("local:") else "")
    if scheme in ("http", "https"):
        url, storage_options = _move_userinfo_to_header(url, storage_options)
    options = normalize_options(scheme, storage_options, session_options)
    if options.backend == "local":
        from litdata_io._storage._local import LocalStorage

        root = url[len("local:") :] if scheme == "local" else url
        return LocalStorage(root, url=url, settings=options.settings)
    if options.provider == "hf":
        from litdata_io._storage._fsspec import HfStorage

        _need("huggingface_hub", scheme)
        return HfStorage(url, options, extra="hf")
    if options.backend == "fsspec":
        from litdata_io._storage._fsspec import FsspecStorage

        _need("fsspec", scheme)
        fs_scheme = _FSSPEC_NAMES.get(scheme, scheme)
        _check_fsspec_protocol(fs_scheme)
        fs_url = fs_scheme + url[len(scheme) :]
        return FsspecStorage(url, options, extra=_EXTRAS.get(scheme, "fsspec"), fs_url=fs_url)
    from litdata_io._storage._obstore import ObstoreStorage

    _need("obstore", scheme)
    return ObstoreStorage(url, options)


def get_storage(
    url: str | os.PathLike[str] | Dir,
    storage_options: Mapping[str, Any] | None = None,
    session_options: Mapping[str, Any] | None = None,
) -> Storage:
    """A :class:`~litdata_io.Storage` rooted at ``url``.

    Args:
        url: anything :func:`~litdata_io.resolve_dir` accepts; for a :class:`~litdata_io.Dir` the
            URL is opened (its local path if it has no URL).
        storage_options: credentials, endpoint and IO settings (see ``docs/storage.md``).
        session_options: boto3 ``Session`` options for s3/r2 (``profile_name``, ``region_name``).

    Raises:
        ImportError: the backend's optional dependency is missing (the message has the pip line).
        ValueError: an unknown scheme or option.
    """
    resolved = resolve_dir(url)
    target_url = resolved.url or resolved.path
    if target_url is None:
        raise ValueError("get_storage needs a path or URL, got an empty Dir")
    scheme = target_url.split("://", 1)[0].lower() if "://" in target_url else "local"
    with _lock:
        target = _registry.get(scheme)
    if target is None:
        target = _entry_point(scheme) or _BUILTIN  # fsspec, if it knows the protocol
    return _load(target)(target_url, storage_options=storage_options, session_options=session_options)
