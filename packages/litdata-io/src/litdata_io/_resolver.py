"""Resolve what a user passes as a dataset location into a :class:`Dir` (local path and/or URL).

``resolve_dir`` accepts a local path, ``file://``, ``local:/network/drive`` (a shared drive whose
chunks are copied into the local cache), any ``scheme://`` URL a backend serves, or a :class:`Dir`;
``{%Y-%m-%d}``-style templates expand to the current time. A local path on a bucket's FUSE mount
(or a Lightning Studio ``/teamspace/...`` connection) resolves to the bucket's URL when found.
``cache_dir_for`` gives each remote dataset its own folder under the cache root.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from litdata_format.internal import read_text
from litdata_io._mounts import bucket_url_for

__all__ = ["Dir", "cache_dir_for", "cache_root", "expand_time_template", "resolve_dir"]

_log = logging.getLogger("litdata_io")
_noticed_lock = threading.Lock()
_noticed: set[str] = set()
_TEMPLATE = re.compile(r"\{(%[^{}]*)\}")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_STUDIO_PREFIXES = {
    "s3_connections": "s3://<bucket>/<path>",
    "gcs_connections": "gs://<bucket>/<path>",
    "s3_folders": "s3://<bucket>/<path>",
    "gcs_folders": "gs://<bucket>/<path>",
    "lightning_storage": "the bucket URL (r2://<bucket>/<path> or s3://<bucket>/<path>)",
    "datasets": "the bucket URL the dataset was written to (s3://..., gs://...)",
    "studios": "the bucket URL the data lives in (s3://..., gs://...)",
}


@dataclass
class Dir:
    """A dataset location: a local folder, a remote URL, or both.

    With only ``path`` the data is read in place. With a ``url`` the data lives there and
    ``path`` (if set) is the local folder chunks are cached in; with ``path=None`` the cache
    folder is chosen under :func:`cache_root`.

    Attributes:
        path: a local folder.
        url: a remote URL (``s3://...``, ``local:/drive/...``, ...).
    """

    path: str | None = None
    url: str | None = None


def expand_time_template(text: str, now: datetime.datetime | None = None) -> str:
    """Replace each ``{%...}`` strftime template in ``text`` (``"s3://b/run_{%Y-%m-%d}"``) with ``now`` (local time)."""
    if "{%" not in text:
        return text
    moment = now or datetime.datetime.now()
    return _TEMPLATE.sub(lambda match: moment.strftime(match.group(1)), text)


class _StudioPathError(ValueError, RuntimeError):
    """A ``/teamspace/...`` path neither mounted nor found: a ValueError here, upstream's RuntimeError too."""


# The environment variables upstream's resolver needs for each kind of Studio path, in the order it checks them.
_STUDIO_ENV = {
    "studios": ("LIGHTNING_CLUSTER_ID", "LIGHTNING_CLOUD_PROJECT_ID"),
    "datasets": ("LIGHTNING_CLUSTER_ID", "LIGHTNING_CLOUD_PROJECT_ID", "LIGHTNING_CLOUD_SPACE_ID"),
}


def _studio_error(path: str) -> ValueError:
    parts = path.split("/")
    kind = parts[2] if len(parts) > 2 else ""
    instead = _STUDIO_PREFIXES.get(kind, "the bucket URL behind the mount (s3://..., gs://...)")
    missing = [name for name in _STUDIO_ENV.get(kind, ("LIGHTNING_CLOUD_PROJECT_ID",)) if not os.environ.get(name)]
    # Upstream's sentence first when it applies: code written for upstream matches it.
    upstream = f"`{missing[0]}` couldn't be found from the environment variables. " if missing else ""
    return _StudioPathError(
        f"{upstream}{path!r} is a Lightning Studio data connection that is not mounted here, and the "
        "bucket behind it was not found (no LITDATA_MOUNTS entry or register_mount call for it, and no "
        "Lightning Studio environment: lightning_sdk with LIGHTNING_CLOUD_PROJECT_ID). "
        f"Pass {instead} with storage_options instead, map the mount with "
        f"LITDATA_MOUNTS='/teamspace/{kind}/<name>=<bucket URL>', or read the mounted files "
        f"as a plain network drive with 'local:{path}' (slow through FUSE)"
    )


def _studio_notice(path: str) -> None:
    parts = path.split("/")
    mount = "/".join(parts[:4])
    with _noticed_lock:
        if mount in _noticed:
            return
        _noticed.add(mount)
    _log.warning(
        "%s: the bucket behind this Lightning Studio mount was not found, so it is read through the mount (slow "
        "under load). To read the bucket directly, set LITDATA_MOUNTS='%s=s3://<bucket>/<prefix>' or call "
        "litdata_io.register_mount(%r, 's3://<bucket>/<prefix>')",
        path,
        mount,
        mount,
    )


def resolve_dir(location: str | os.PathLike[str] | Dir | None) -> Dir:
    """Resolve a dataset location into a :class:`Dir`.

    Args:
        location: a local path, ``file://`` URL, ``local:/drive`` path, object-store URL, or a
            :class:`Dir` (its ``path`` and ``url`` are resolved the same way).

    Returns:
        ``Dir(path=<absolute path>, url=None)`` for local data, ``Dir(path=None,
        url="local:<absolute path>")`` for a network drive, ``Dir(path=None, url=<url>)`` for
        remote data, and the given cache path next to a resolved URL for a :class:`Dir`.

        A local path on a bucket's FUSE mount (or a ``/teamspace/...`` Studio connection) whose
        bucket is found gives ``Dir(path=None, url=<bucket URL>)``; ``local:<path>`` keeps reading
        through the mount.

    Raises:
        ValueError: for a ``/teamspace/...`` Lightning Studio path that is neither mounted here nor
            mapped to a bucket, or an empty location.
        TypeError: for anything that is not a path, a string or a :class:`Dir`.
    """
    if location is None:
        return Dir()
    if isinstance(location, Dir):
        resolved_url = resolve_dir(location.url) if location.url else Dir()
        url = resolved_url.url if resolved_url.url else resolved_url.path
        path = str(_absolute(expand_time_template(os.fspath(location.path)))) if location.path else None
        return Dir(path=path, url=url)
    # Typed, yet checked: the error names what an untyped caller passed instead.
    if not isinstance(location, (str, os.PathLike)):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"a dataset location must be a path, a URL string or a Dir, not {type(location).__name__}")
    text = expand_time_template(os.fspath(location))
    if not text.strip():
        raise ValueError("the dataset location is an empty string; pass a local path or a URL such as s3://bucket/data")
    if text.startswith("local:") and not text.startswith("local://"):
        return Dir(path=None, url="local:" + str(_absolute(text[len("local:") :])))
    match = _SCHEME.match(text)
    if match:
        scheme = match.group(1).lower()
        if scheme == "file":
            return resolve_dir(text[len("file://") :] or "/")
        if scheme == "local":
            return Dir(path=None, url="local:" + str(_absolute(text[len("local://") :])))
        return Dir(path=None, url=_normalize_url(scheme, text[match.end() :]))
    path = _absolute(text)
    if str(path).startswith("/teamspace/studios/this_studio"):
        return Dir(path=str(path), url=None)
    bucket_url = bucket_url_for(str(path))
    if bucket_url is not None:
        # A FUSE mount of a bucket is slow and fails under load: read the bucket itself.
        _log.info("reading %s from %s, the bucket behind its mount", path, bucket_url)
        return Dir(path=None, url=bucket_url)
    if str(path).startswith("/teamspace/"):
        if not path.exists():
            raise _studio_error(str(path))
        _studio_notice(str(path))
    return Dir(path=str(path), url=None)


def _absolute(text: str) -> Path:
    # An absolute path without resolving symlinks: a mount point may be a symlink worth keeping.
    return Path(os.path.abspath(os.path.expanduser(text)))


def _normalize_url(scheme: str, rest: str) -> str:
    scheme = {"az": "azure", "gcs": "gs"}.get(scheme, scheme)
    if scheme in ("s3", "gs", "r2", "azure") and not rest.split("/", 1)[0]:
        raise ValueError(f"{scheme}://{rest!r} names no bucket; write {scheme}://<bucket>/<path>")
    if scheme == "hf" and not re.match(r"(datasets|models|spaces)/[^/]+/[^/]+", rest):
        raise ValueError(
            f"hf://{rest} is not a Hugging Face repository path; write hf://datasets/<org>/<name>[/<path>]"
        )
    rest = rest.rstrip("/")
    if not rest:
        raise ValueError(f"{scheme}:// names no location; write {scheme}://<host or bucket>/<path>")
    return f"{scheme}://{rest}"


def cache_root() -> Path:
    """The folder remote datasets are cached under: ``$LITDATA_CACHE_DIR`` or ``~/.lightning/chunks``."""
    configured = read_text("LITDATA_CACHE_DIR")
    if configured:
        return _absolute(configured)
    return Path.home() / ".lightning" / "chunks"


def cache_dir_for(url: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder of the remote dataset at ``url``: ``<root>/<slug>-<hash>``.

    The slug keeps the end of the URL readable (``s3-my-bucket-data-...``); the 12-hex-digit hash
    of the whole normalized URL makes the folder unique to that dataset. The folder is not created.

    Args:
        url: the dataset's URL (a :func:`resolve_dir` result's ``url``; trailing ``/`` ignored).
        cache_dir: the cache root to use instead of :func:`cache_root`.
    """
    normalized = url.strip().rstrip("/") or url
    digest = hashlib.sha256(normalized.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9._]+", "-", normalized).strip("-.") or "dataset"
    if len(slug) > 60:
        slug = slug[:20].rstrip("-.") + "--" + slug[-36:].lstrip("-.")
    root = _absolute(os.fspath(cache_dir)) if cache_dir is not None else cache_root()
    return root / f"{slug}-{digest}"
