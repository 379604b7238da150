"""Where a job's files go: a local folder or a storage URL, as one :class:`~litdata_io.Storage`.

:class:`Output` is small and picklable (the storage it wraps is opened lazily in each process), so
the parent and every worker talk to the same destination through it. Keys are ``/``-separated
and relative to the output root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litdata_format import INDEX_FILENAME, DatasetIndex, parse_index
from litdata_io import Dir, resolve_dir
from litdata_io.internal import PerProcess, check_own_folders
from litdata_prep._staging import PROBE_PREFIX, RAY_STAGING, STAGING_PREFIX, temp_staging

if TYPE_CHECKING:
    from litdata_io import ObjectInfo, Storage

__all__ = ["DatasetExistsError", "Output", "make_staging", "ray_staging", "remove_staging"]


class DatasetExistsError(FileExistsError, RuntimeError, ValueError):
    """The output already holds an optimized dataset (an ``index.json``).

    A ``RuntimeError`` as upstream LitData's ``optimize`` raises, a ``ValueError`` as its
    ``merge_datasets`` raises, and a ``FileExistsError`` for what it is.
    """


class Output:
    """One output location of ``optimize``/``map``/``merge_datasets``: a storage rooted at it.

    As fsspec's ``DirFileSystem`` is a filesystem over a folder, an output answers the
    :class:`~litdata_io.Storage` calls jobs make over a local folder (dot-files listed too, as a bucket
    lists them) or a bucket prefix, so callers do not ask which it is. What differs stays here:
    :meth:`publish` renames into a local folder and uploads into a bucket, a local write refuses a
    sub-folder that is a link, and deleting leaves no empty folder. Not a ``Storage`` subclass: that
    brings asyncio into every spawned worker.

    Args:
        location: the resolved output (a local ``path`` or a ``url``).
        storage_options: credentials and endpoint for a URL.
    """

    def __init__(self, location: Dir, storage_options: dict[str, Any] | None = None) -> None:
        if location.url is None and location.path is None:
            raise ValueError("an output needs a local path or a URL")
        self.url = str(location.url or location.path)
        #: The local folder, or None for a bucket.
        self.folder = Path(location.path) if location.url is None and location.path is not None else None
        self.storage_options = dict(storage_options or {})
        self._storage: PerProcess[Storage] = PerProcess()

    @classmethod
    def at(cls, location: str | os.PathLike[str] | Dir, storage_options: dict[str, Any] | None = None) -> Output:
        """The output at ``location`` as a user names it (``{%...}`` templates expanded, ``local:/x`` the folder)."""
        resolved = resolve_dir(location)
        if resolved.url is not None and resolved.url.startswith("local:"):
            resolved = Dir(path=resolved.url[len("local:") :])
        return cls(resolved, storage_options)

    def __repr__(self) -> str:
        return f"Output({self.url!r})"

    @property
    def _inner(self) -> Storage:
        """The folder's or the bucket's storage, opened once in each process."""
        return self._storage.get(self._open)

    def _open(self) -> Storage:
        # Imported here: a worker that only renames its chunks into a local folder never loads asyncio.
        if self.folder is not None:
            from litdata_io.internal import LocalStorage

            return LocalStorage(self.folder, hidden=True)
        from litdata_io import get_storage

        return get_storage(self.url, self.storage_options)

    # -- Storage's calls, on the folder or the bucket ------------------------------------------
    def url_for(self, key: str) -> str:
        """The full URL (or path) of ``key``, for messages."""
        return f"{self.url.rstrip('/')}/{key}"

    def exists(self, key: str) -> bool:
        return self._inner.exists(key)

    def get(self, key: str) -> bytes:
        return self._inner.get(key)

    def put(self, key: str, data: bytes) -> None:
        self._own_folder(key)
        self._inner.put(key, data)

    def put_new(self, key: str, data: bytes) -> bool:
        self._own_folder(key)
        return self._inner.put_new(key, data)

    def head(self, key: str) -> ObjectInfo:
        return self._inner.head(key)

    def replace_if(self, key: str, data: bytes, expected: ObjectInfo) -> bool:
        """Replace ``key`` only if it is still the version ``expected`` (see :meth:`Storage.replace_if`)."""
        return self._inner.replace_if(key, data, expected)

    def download(self, key: str, destination: str | Path) -> int:
        return self._inner.download(key, destination)

    def delete(self, key: str) -> None:
        """Delete ``key``; in a local folder, with the folders it leaves empty (``.checkpoints/``)."""
        self._own_folder(key, make=False)
        self._inner.delete(key)
        root = self.folder
        for folder in (root / key).parents if root is not None else ():
            if folder == root or not self.holds(folder):
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone): the folders above are not empty either
                break

    # -- what a job adds ----------------------------------------------------------------------
    def all_keys(self) -> list[str]:
        """Every key under the output (files only, recursively)."""
        return [info.key for info in self._inner.list("")]

    def read_json(self, key: str) -> Any:
        """The decoded JSON object at ``key``, or None if there is none."""
        try:
            data = self.get(key)
        except FileNotFoundError:
            return None
        return json.loads(data)

    def read_index(self, key: str = INDEX_FILENAME) -> DatasetIndex | None:
        """The index at ``key``, checked as readers check it, or None if there is none."""
        obj = self.read_json(key)
        return None if obj is None else parse_index(obj, self.url_for(key))

    def write_json(self, key: str, obj: Any) -> None:
        """Publish ``obj`` at ``key`` whole (a temporary name and a rename locally)."""
        self.put(key, json.dumps(obj, sort_keys=True).encode())

    def publish(self, source: str | os.PathLike[str], key: str) -> None:
        """Move the local file ``source`` to ``key``: renamed into a local folder, uploaded to a bucket."""
        self._own_folder(key)
        if self.folder is not None:
            try:
                os.replace(source, self.folder / key)
                return
            except OSError:
                pass  # another filesystem: copied through a temporary name below
        self._inner.upload(os.fspath(source), key)
        Path(source).unlink(missing_ok=True)

    def delete_many(self, keys: list[str]) -> None:
        for key in keys:
            self.delete(key)
        if self.folder is not None:
            for path in sorted((p for p in self.folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    path.rmdir()

    def holds(self, path: Path) -> bool:
        """Whether the local file ``path`` is in this output (never for a bucket)."""
        return self.folder is not None and path.is_relative_to(self.folder)

    @contextlib.contextmanager
    def local_copy(self, keys: list[str]) -> Iterator[Path]:
        """A local folder holding ``keys``: the output's own, else a temporary one they are downloaded into."""
        if self.folder is not None:
            yield self.folder
            return
        with tempfile.TemporaryDirectory(prefix="litdata-fetch-", ignore_cleanup_errors=True) as tmp:
            for key in keys:
                self._inner.download(key, Path(tmp) / key)
            yield Path(tmp)

    def _own_folder(self, key: str, make: bool = True) -> None:
        """Make the local folder of ``key`` (if ``make``); refuse one that is a link (``.checkpoints`` planted as one).

        In an output folder others can write to, a link would send our files wherever it points.
        """
        if self.folder is None or "/" not in key:
            return
        folder = (self.folder / key).parent
        if make:
            folder.mkdir(parents=True, exist_ok=True)
        elif not os.path.lexists(folder):
            return
        check_own_folders(self.folder, folder)

    def check_writable(self) -> None:
        """Create and remove a probe object, so a read-only output fails before any work starts."""
        probe = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        fix = "check the URL, the bucket and storage_options"
        try:
            if self.folder is not None:
                fix = "choose a folder you can write to"
                self.folder.mkdir(parents=True, exist_ok=True)
            self.put(probe, b"")
            self.delete(probe)
        except OSError as err:
            if self.folder is not None:
                raise PermissionError(f"output_dir {self.url} is not writable ({err.strerror or err}); {fix}") from None
            raise PermissionError(f"output_dir {self.url} is not writable: {err}; {fix}") from err
        except Exception as err:
            raise PermissionError(f"output_dir {self.url} is not writable: {err}; {fix}") from err


# Where a job's files wait before :meth:`Output.publish`: inside a local output, so publishing is a rename on one
# filesystem (and the next run of a node replaces what a killed one left); a bucket's in the temporary directory.
def _in_output(output: Output, name: str) -> Path | None:
    return None if output.folder is None else output.folder / name


def make_staging(output: Output, node_rank: int, what: str) -> Path:
    """A fresh local folder for this node's unpublished files."""
    folder = _in_output(output, f"{STAGING_PREFIX}{node_rank}")
    if folder is None:
        return temp_staging(what)
    shutil.rmtree(folder, ignore_errors=True)  # left by a run that was killed
    folder.mkdir(parents=True)
    return folder


def remove_staging(output: Output, node_rank: int) -> None:
    """Remove the local staging folder a killed run left in the output folder (if any)."""
    folder = _in_output(output, f"{STAGING_PREFIX}{node_rank}")
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def ray_staging(output: Output) -> Path | None:
    """The staging root the Ray attempts of every node share in a local output; None: each stages on its node."""
    return _in_output(output, RAY_STAGING)
