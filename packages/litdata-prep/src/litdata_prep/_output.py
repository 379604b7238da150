"""Where a job's files go: a local folder, written in place, or a storage URL, uploaded to.

:class:`Output` is small and picklable (the storage client is opened lazily in each process), so
the parent and every worker talk to the same destination through it. Keys are ``/``-separated
and relative to the output root.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litdata_format import INDEX_FILENAME, DatasetIndex, parse_index
from litdata_io import Dir
from litdata_io.internal import PerProcess, check_own_folders

if TYPE_CHECKING:
    from litdata_io import Storage

__all__ = ["DatasetExistsError", "Output"]


class DatasetExistsError(FileExistsError, RuntimeError, ValueError):
    """The output already holds an optimized dataset (an ``index.json``).

    A ``RuntimeError`` as upstream LitData's ``optimize`` raises, a ``ValueError`` as its
    ``merge_datasets`` raises, and a ``FileExistsError`` for what it is.
    """


class Output:
    """One output location of ``optimize``/``map``/``merge_datasets``: a :class:`~litdata_io.Storage`.

    A local folder is a ``LocalStorage`` that lists dot-files too (the job's ``.checkpoints/`` and
    leftover temporary files, which a bucket lists like any key), so every read and write goes
    through the same calls whatever the destination. What stays local-only: a file published into
    a local folder is renamed there rather than copied, and deleting leaves no empty folder.

    Args:
        location: the resolved output (a local ``path`` or a ``url``).
        storage_options: credentials and endpoint for a URL.
    """

    def __init__(self, location: Dir, storage_options: dict[str, Any] | None = None) -> None:
        if location.url is None and location.path is None:
            raise ValueError("an output needs a local path or a URL")
        self.dir = location
        self.storage_options = dict(storage_options or {})
        self._storage: PerProcess[Storage] = PerProcess()

    # -- what it is -----------------------------------------------------------------------------
    @property
    def is_remote(self) -> bool:
        return self.dir.url is not None

    @property
    def local_path(self) -> Path:
        """The local folder (only for a local output)."""
        if self.dir.path is None or self.is_remote:
            raise ValueError(f"{self.display} is not a local folder")
        return Path(self.dir.path)

    @property
    def display(self) -> str:
        return str(self.dir.url or self.dir.path)

    def __repr__(self) -> str:
        return f"Output({self.display!r})"

    @property
    def storage(self) -> Storage:
        """The destination's storage, opened once in each process."""
        return self._storage.get(self._open)

    def _open(self) -> Storage:
        # Imported here: a worker that only renames its chunks into a local folder never loads
        # the storage layer (nor asyncio), which its start-up would pay for.
        if not self.is_remote:
            from litdata_io.internal import LocalStorage

            return LocalStorage(self.local_path, hidden=True)
        from litdata_io import get_storage

        return get_storage(self.dir.url or "", self.storage_options)

    # -- reading --------------------------------------------------------------------------------
    def list(self) -> list[str]:
        """Every key under the output (files only, recursively)."""
        return [info.key for info in self.storage.list("")]

    def exists(self, key: str) -> bool:
        return self.storage.exists(key)

    def read_json(self, key: str) -> Any:
        """The decoded JSON object at ``key``, or None if there is none."""
        try:
            data = self.storage.get(key)
        except FileNotFoundError:
            return None
        return json.loads(data)

    def read_index(self, key: str = INDEX_FILENAME) -> DatasetIndex | None:
        """The index at ``key``, checked as readers check it, or None if there is none."""
        obj = self.read_json(key)
        return None if obj is None else parse_index(obj, f"{self.display}/{key}")

    # -- writing --------------------------------------------------------------------------------
    def write_json(self, key: str, obj: Any) -> None:
        """Publish ``obj`` at ``key`` whole (a temporary name and a rename locally)."""
        self._own_folder(key)
        self.storage.put(key, json.dumps(obj, sort_keys=True).encode())

    def _own_folder(self, key: str, make: bool = True) -> None:
        """Make the local folder of ``key`` (if ``make``); refuse one that is a link (``.checkpoints`` planted as one).

        In an output folder others can write to, a link would send our files wherever it points.
        """
        if self.is_remote or "/" not in key:
            return
        folder = (self.local_path / key).parent
        if make:
            folder.mkdir(parents=True, exist_ok=True)
        elif not os.path.lexists(folder):
            return
        check_own_folders(self.local_path, folder)

    def put_file(self, source: str | os.PathLike[str], key: str, move: bool = True) -> None:
        """Publish the local file ``source`` at ``key`` (moved when ``move``: renamed into a local output)."""
        self._own_folder(key)
        if move and not self.is_remote:
            dest = self.local_path / key
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(source, dest)
                return
            except OSError:
                pass  # another filesystem: copied through a temporary name below
        self.storage.upload(os.fspath(source), key)
        if move:
            Path(source).unlink(missing_ok=True)

    def delete(self, key: str) -> None:
        """Delete ``key``; in a local output, with the folders it leaves empty (``.checkpoints/``)."""
        self._own_folder(key, make=False)
        self.storage.delete(key)
        if self.is_remote:
            return
        root = self.local_path
        for folder in (root / key).parents:
            if folder == root or not folder.is_relative_to(root):
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone): the folders above are not empty either
                break

    def delete_many(self, keys: list[str]) -> None:
        for key in keys:
            self.delete(key)
        if not self.is_remote:
            _remove_empty_dirs(self.local_path)

    def check_writable(self) -> None:
        """Create and remove a probe object, so a read-only output fails before any work starts."""
        probe = f".litdata-write-probe-{uuid.uuid4().hex}"
        try:
            if not self.is_remote:
                self.local_path.mkdir(parents=True, exist_ok=True)
            self.storage.put(probe, b"")
            self.storage.delete(probe)
        except OSError as err:
            if self.is_remote:
                raise PermissionError(
                    f"output_dir {self.display} is not writable: {err}; check the URL, the bucket and storage_options"
                ) from err
            raise PermissionError(
                f"output_dir {self.display} is not writable ({err.strerror or err}); choose a folder you can write to"
            ) from None
        except Exception as err:
            raise PermissionError(
                f"output_dir {self.display} is not writable: {err}; check the URL, the bucket and storage_options"
            ) from err


def _remove_empty_dirs(root: Path) -> None:
    for path in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            path.rmdir()
