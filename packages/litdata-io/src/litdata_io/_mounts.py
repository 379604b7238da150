"""Find the bucket behind a FUSE mount, so a dataset on the mount is read from the bucket directly.

Reading chunks through a bucket's FUSE mount (mountpoint-s3, s3fs, goofys, gcsfuse, blobfuse2,
rclone) is slow and fails under load. A local path is looked up, in this order:

1. the user's mapping: ``register_mount("/mnt/data", "s3://bucket/prefix")`` or the environment
   variable ``LITDATA_MOUNTS="/mnt/data=s3://bucket/prefix;/mnt/other=gs://b"``;
2. the mount table (``/proc/self/mountinfo``): a FUSE filesystem of a known bucket tool, its
   bucket taken from the mount's source (gcsfuse, goofys, rclone) or, when the source only names
   the tool (mountpoint-s3, s3fs, blobfuse2), from the mounting process's command line;
3. for ``/teamspace/<kind>/<name>/...`` Lightning Studio paths, the Studio's data connections
   (``lightning_sdk`` and ``LIGHTNING_CLOUD_PROJECT_ID``, present inside a Studio).

``LITDATA_MOUNTINFO`` points at another mount table (for tests and for containers whose
``/proc`` is not the host's).
"""

from __future__ import annotations

import configparser
import importlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litdata_format.internal import read_text

__all__ = ["MountEntry", "bucket_url_for", "parse_mountinfo", "register_mount", "registered_mounts"]

_log = logging.getLogger("litdata_io")
_lock = threading.Lock()
_registered: dict[str, str] = {}
_noticed: set[str] = set()
_BUCKET_SCHEMES = ("s3://", "gs://", "r2://", "azure://", "az://", "gcs://")
# Tools whose mount source names the bucket: the FUSE subtype (``fuse.<tool>``) or the source's tool word.
_SOURCE_TOOLS = {"gcsfuse": "gs", "goofys": "s3", "rclone": "rclone"}
# Tools whose mount source names only the tool: the bucket is on the mounting process's command line.
_PROCESS_TOOLS = {"mountpoint-s3": "mount-s3", "mount-s3": "mount-s3", "s3fs": "s3fs", "blobfuse2": "blobfuse2"}
# Lightning Studio connection kinds and the field of the data connection that holds the bucket URL.
_STUDIO_FIELDS = {
    "s3_connections": "aws",
    "gcs_connections": "gcp",
    "s3_folders": "s3_folder",
    "gcs_folders": "gcs_folder",
    "lightning_storage": "r2",
}


@dataclass(frozen=True)
class MountEntry:
    """One line of a ``/proc/<pid>/mountinfo`` table (``root``: ``/`` unless a bind mount of a subfolder).

    ``source`` is a device, a bucket name, ``remote:path`` or a tool name, by ``fstype`` (``fuse.gcsfuse``).
    """

    root: str
    mountpoint: str
    fstype: str
    source: str
    options: str


def _unescape(field: str) -> str:
    # The kernel writes space, tab, newline and backslash in octal.
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """The entries of a mountinfo table (``man 5 proc``).

    Each line reads ``id parent maj:min root mountpoint opts [tags] - type source superopts``.
    """
    entries: list[MountEntry] = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 7:
            continue
        dash = fields.index("-")
        tail = fields[dash + 1 :]
        if dash < 5 or len(tail) < 2:
            continue
        entries.append(
            MountEntry(
                root=_unescape(fields[3]),
                mountpoint=_unescape(fields[4]),
                fstype=tail[0].lower(),
                source=_unescape(tail[1]),
                options=tail[2] if len(tail) > 2 else "",
            )
        )
    return entries


def register_mount(mount_path: str | os.PathLike[str], url: str) -> None:
    """Read the data under a mounted folder from the bucket URL behind it.

    A path under ``mount_path`` is then resolved to ``url`` joined with the rest of the path, so a
    dataset on a FUSE mount of a bucket (or a Lightning Studio ``/teamspace/...`` connection) is
    read from the bucket with your credentials instead of through the mount. The environment
    variable ``LITDATA_MOUNTS`` (``/mnt/a=s3://b/p;/mnt/c=gs://d``) does the same for every process.

    Args:
        mount_path: the mounted folder, e.g. ``/mnt/imagenet`` or ``/teamspace/s3_connections/imagenet``.
        url: the bucket URL it shows, e.g. ``s3://my-bucket/imagenet``.

    Raises:
        ValueError: ``url`` is not a bucket URL (``s3://``, ``gs://``, ``r2://``, ``azure://``).
    """
    if not url.startswith(_BUCKET_SCHEMES):
        raise ValueError(
            f"register_mount({os.fspath(mount_path)!r}, {url!r}): the URL must be s3://, gs://, r2:// or azure://"
        )
    with _lock:
        _registered[_norm(os.fspath(mount_path))] = url.rstrip("/")


def registered_mounts() -> dict[str, str]:
    """The mount-to-URL mapping in force: ``LITDATA_MOUNTS`` entries, then :func:`register_mount` calls over them."""
    mapping: dict[str, str] = {}
    raw = read_text("LITDATA_MOUNTS") or ""
    for item in re.split(r"[;\n]", raw):
        if not item.strip():
            continue
        path, sep, url = item.partition("=")
        if not sep or not path.strip() or not url.strip().startswith(_BUCKET_SCHEMES):
            raise ValueError(
                f"LITDATA_MOUNTS entry {item.strip()!r}: write <mounted folder>=<bucket URL>, e.g. "
                "/mnt/data=s3://my-bucket/data (entries separated by ';')"
            )
        mapping[_norm(path.strip())] = url.strip().rstrip("/")
    with _lock:
        mapping.update(_registered)
    return mapping


def _norm(path: str) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def _join(url: str, rest: str) -> str:
    rest = rest.strip("/")
    return f"{url.rstrip('/')}/{rest}" if rest else url.rstrip("/")


def _relative(path: str, mountpoint: str) -> str | None:
    mountpoint = mountpoint.rstrip("/") or "/"
    if path == mountpoint:
        return ""
    if mountpoint == "/":
        return path.lstrip("/")
    if path.startswith(mountpoint + "/"):
        return path[len(mountpoint) + 1 :]
    return None


def _notice_once(key: str, message: str) -> None:
    with _lock:
        if key in _noticed:
            return
        _noticed.add(key)
    _log.warning(message)


def bucket_url_for(path: str, mountinfo: str | None = None) -> str | None:
    """The bucket URL a local ``path`` shows through a mount (mount table: ``mountinfo``), or None."""
    path = _norm(path)
    best: tuple[str, str] | None = None
    for mount, url in registered_mounts().items():
        rest = _relative(path, mount)
        if rest is not None and (best is None or len(mount) > len(best[0])):
            best = (mount, _join(url, rest))
    if best is not None:
        return best[1]
    entry, rest = _fuse_entry(path, mountinfo)
    if entry is not None and rest is not None:
        found = _entry_url(entry)
        if found:
            return _join(found, os.path.join(entry.root.strip("/"), rest))
    if path.startswith("/teamspace/"):
        found = _studio_url(path)
        if found:
            return found
    if entry is not None:
        _notice_once(
            entry.mountpoint,
            f"{path} is on a {entry.fstype} mount ({entry.source} at {entry.mountpoint}) whose bucket litdata could "
            f"not find, so it is read through the mount (slow under load). To read it from the bucket, set "
            f"LITDATA_MOUNTS='{entry.mountpoint}=s3://<bucket>/<prefix>' or call "
            f"litdata_io.register_mount({entry.mountpoint!r}, 's3://<bucket>/<prefix>')",
        )
    return None


def _read_mount_table(mountinfo: str | None) -> str | None:
    """The text of the mount table (``mountinfo``, ``$LITDATA_MOUNTINFO`` or ``/proc/self/mountinfo``), or None."""
    table = mountinfo or read_text("LITDATA_MOUNTINFO") or "/proc/self/mountinfo"
    try:
        return Path(table).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _fuse_entry(path: str, mountinfo: str | None) -> tuple[MountEntry | None, str | None]:
    text = _read_mount_table(mountinfo)
    if text is None:
        return None, None
    best: MountEntry | None = None
    for entry in parse_mountinfo(text):
        if _relative(path, entry.mountpoint) is not None and (
            best is None or len(entry.mountpoint) >= len(best.mountpoint)
        ):
            best = entry
    if best is None or not best.fstype.startswith(("fuse", "fuse3")) or not _tool_of(best):
        return None, None
    return best, _relative(path, best.mountpoint)


def _tool_of(entry: MountEntry) -> str | None:
    subtype = entry.fstype.partition(".")[2]
    for name in (subtype, entry.source.lower()):
        if name in _SOURCE_TOOLS or name in _PROCESS_TOOLS:
            return name
    return None


def _entry_url(entry: MountEntry) -> str | None:
    tool = _tool_of(entry)
    if tool in _SOURCE_TOOLS and entry.source.lower() != tool:
        if tool == "rclone":
            return _rclone_url(entry.source)
        bucket, _, prefix = entry.source.partition(":")  # goofys shows bucket:prefix
        return _join(f"{_SOURCE_TOOLS[tool]}://{bucket}", prefix)
    program = _PROCESS_TOOLS.get(tool or "") or tool
    if program is None:
        return None
    argv = _mounting_command(program, entry.mountpoint)
    return _command_url(program, argv, entry.mountpoint) if argv else None


def _rclone_url(source: str) -> str | None:
    remote, _, rest = source.partition(":")
    if source.startswith(":"):  # on-the-fly remote ":s3:bucket/path"
        remote_type, _, rest = source[1:].partition(":")
    else:
        config = configparser.ConfigParser()
        default = Path.home() / ".config" / "rclone" / "rclone.conf"
        config.read(os.environ.get("RCLONE_CONFIG") or default)
        remote_type = config.get(remote, "type", fallback="")
    scheme = {"s3": "s3", "google cloud storage": "gs", "gcs": "gs", "azureblob": "azure"}.get(remote_type.lower())
    if scheme is None or not rest.strip("/"):
        return None
    return f"{scheme}://{rest.strip('/')}"


def _mounting_command(program: str, mountpoint: str) -> list[str] | None:
    """The command line of the running ``program`` that mounted ``mountpoint`` (its daemon), if visible."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [arg.decode(errors="replace") for arg in argv if arg]
        if not args or os.path.basename(args[0]) != program:
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = "/"
        # The mount point may be given relative to the daemon's working folder: name it in full.
        named = [mountpoint if os.path.normpath(os.path.join(cwd, arg)) == mountpoint else arg for arg in args[1:]]
        if mountpoint in named:
            return [args[0], *named]
    return None


def _option(args: list[str], name: str) -> str | None:
    """The value of ``--name value``, ``--name=value`` or ``-o name=value`` in ``args``."""
    for index, arg in enumerate(args):
        if arg == f"--{name}" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg.startswith("-o") and not arg.startswith("--"):
            options = arg[2:] or (args[index + 1] if index + 1 < len(args) else "")
            for option in options.split(","):
                key, _, value = option.partition("=")
                if key == name and value:
                    return value
    return None


def _command_url(program: str, argv: list[str], mountpoint: str) -> str | None:
    args = argv[1:]
    where = next((i for i, arg in enumerate(args) if os.path.normpath(arg) == mountpoint), None)
    if program == "blobfuse2":
        # The storage account comes from the user's credentials (AZURE_STORAGE_ACCOUNT_NAME), as for azure:// URLs.
        container = _option(args, "container-name") or _yaml_value(_option(args, "config-file"), "container")
        return f"azure://{container}" if container else None
    bucket = _option(args, "bucket")  # s3fs -o bucket=name
    if bucket is None and where:
        bucket = args[where - 1]  # mount-s3 <bucket> <dir>, s3fs <bucket[:/prefix]> <dir>
        if bucket.startswith("-"):
            return None
    if not bucket:
        return None
    bucket, _, prefix = bucket.removeprefix("s3://").partition(":")
    if program == "mount-s3":
        bucket, _, prefix = bucket.partition("/")
        prefix = _option(args, "prefix") or prefix
    return _join(f"s3://{bucket}", prefix)


def _yaml_value(config: str | None, key: str) -> str | None:
    # blobfuse2's config is YAML; its container and account are plain ``key: value`` lines.
    if not config:
        return None
    try:
        text = Path(config).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(rf"^\s*{re.escape(key)}\s*:\s*['\"]?([^'\"\s#]+)", text, re.MULTILINE)
    return match.group(1) if match else None


def _studio_url(path: str) -> str | None:
    """The bucket URL behind a ``/teamspace/<kind>/<name>/...`` path, from the Studio's data connections."""
    parts = path.split("/")
    field = _STUDIO_FIELDS.get(parts[2]) if len(parts) > 3 else None
    project = os.environ.get("LIGHTNING_CLOUD_PROJECT_ID")
    if field is None or not project:
        return None
    try:
        rest_client: Any = importlib.import_module("lightning_sdk.lightning_cloud.rest_client")
    except ImportError:
        return None
    try:
        client = rest_client.LightningClient(max_tries=2)
        connections = client.data_connection_service_list_data_connections(project).data_connections
    except Exception as error:  # the Studio's API is down or refuses: read through the mount instead
        _notice_once(f"studio:{project}", f"Lightning Studio data connections could not be listed ({error})")
        return None
    for connection in connections:
        if getattr(connection, "name", None) == parts[3]:
            source = getattr(getattr(connection, field, None), "source", None)
            if isinstance(source, str) and source.startswith(_BUCKET_SCHEMES):
                return _join(source, "/".join(parts[4:]))
    return None
