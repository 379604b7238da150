"""The behaviour every :class:`litdata_io.Storage` backend must have, as one abstract test class.

A backend's test module subclasses :class:`StorageConformance` as ``Test<Backend>`` and provides a
``storage_factory`` fixture: a callable that takes extra ``storage_options`` and returns a storage
rooted at an empty location, the same one for every call within a test (an example is in
docs/storage.md). Optional knobs:

- ``writable = False`` for read-only backends; then override the ``seed`` fixture to write test
  objects through another client (the write tests then check that a write fails with an OSError).
- ``shared_between_processes = False`` when another process cannot see the data (``memory://``).
- the ``secrets`` fixture: credential strings that must never show in reprs or error messages.

Shipped in litdata-io (as fsspec ships ``fsspec.tests.abstract``) so a third-party backend can run
it too; its module is not named ``test_*``, so pytest collects only the subclasses.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import pytest
except ImportError as error:
    raise ImportError('litdata_io.testing runs its suite under pytest: pip install "litdata-io[testing]"') from error

from litdata_format import checksum_file
from litdata_io import ObjectInfo, Storage
from litdata_io.internal import run_sync

__all__ = ["StorageConformance", "StorageFactory"]

StorageFactory = Callable[..., Storage]


def _payload(size: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(size))


def _read_in_fork(storage: Storage, key: str, queue: Any) -> None:
    try:
        queue.put(("ok", storage.get(key), storage.head(key).size))
    except BaseException as exc:  # report anything to the parent rather than dying silently
        queue.put(("error", f"{type(exc).__name__}: {exc}", 0))


class StorageConformance:
    """Abstract conformance tests; subclasses provide the ``storage_factory`` fixture."""

    writable: bool = True
    shared_between_processes: bool = True

    @pytest.fixture
    def storage_factory(self) -> StorageFactory:
        raise NotImplementedError("subclasses provide a storage_factory fixture")

    @pytest.fixture
    def storage(self, storage_factory: StorageFactory) -> Storage:
        return storage_factory()

    @pytest.fixture
    def seed(self, storage: Storage) -> Callable[[str, bytes], None]:
        return storage.put

    @pytest.fixture
    def secrets(self) -> list[str]:
        return []

    def _writes_allowed(self, storage: Storage) -> bool:
        """True for writable backends; for read-only ones, check that a write fails loudly instead."""
        if self.writable:
            return True
        with pytest.raises(OSError):  # ReadOnlyStorageError / StorageError are OSErrors
            storage.put("refused.bin", b"x")
        return False

    # -- reading ----------------------------------------------------------------------------------
    def test_head_get_exists(self, storage: Storage, seed: Callable[[str, bytes], None]) -> None:
        data = _payload(1000)
        seed("dir/object.bin", data)
        info = storage.head("dir/object.bin")
        assert isinstance(info, ObjectInfo)
        assert (info.key, info.size) == ("dir/object.bin", 1000)
        assert storage.get("dir/object.bin") == data
        assert storage.exists("dir/object.bin")
        assert not storage.exists("dir/other.bin")
        assert not storage.exists("dir")  # a folder is not an object

    def test_empty_object(self, storage: Storage, seed: Callable[[str, bytes], None]) -> None:
        seed("empty.bin", b"")
        assert storage.head("empty.bin").size == 0
        assert storage.get("empty.bin") == b""

    def test_get_range(self, storage: Storage, seed: Callable[[str, bytes], None]) -> None:
        data = _payload(5000)
        seed("range.bin", data)
        assert storage.get_range("range.bin", 0, 10) == data[:10]
        assert storage.get_range("range.bin", 1234, 4321) == data[1234:4321]
        assert storage.get_range("range.bin", 4990, 5000) == data[4990:]
        assert storage.get_range("range.bin", 7, 7) == b""

    def test_missing_object_is_file_not_found_naming_the_url(self, storage: Storage, tmp_path: Path) -> None:
        url = storage.url_for("no/such.bin")
        tmp_path = tmp_path / "downloads"
        tmp_path.mkdir()
        for call in (
            lambda: storage.head("no/such.bin"),
            lambda: storage.get("no/such.bin"),
            lambda: storage.get_range("no/such.bin", 0, 4),
            lambda: storage.download("no/such.bin", tmp_path / "out.bin"),
        ):
            with pytest.raises(FileNotFoundError) as info:
                call()
            assert url in str(info.value)
        assert list(tmp_path.iterdir()) == []  # a failed download leaves nothing behind

    def test_list_prefix_and_recursion(self, storage: Storage, seed: Callable[[str, bytes], None]) -> None:
        for key in ("a/1.bin", "a/2.bin", "a/b/3.bin", "ab/4.bin", "c.bin"):
            seed(key, key.encode())

        def keys(prefix: str = "", recursive: bool = True) -> list[str]:
            return [info.key for info in storage.list(prefix, recursive=recursive)]

        assert keys() == ["a/1.bin", "a/2.bin", "a/b/3.bin", "ab/4.bin", "c.bin"]
        assert keys("a/") == ["a/1.bin", "a/2.bin", "a/b/3.bin"]
        assert keys("a") == ["a/1.bin", "a/2.bin", "a/b/3.bin", "ab/4.bin"]
        assert keys("a/", recursive=False) == ["a/1.bin", "a/2.bin"]
        assert keys("", recursive=False) == ["c.bin"]
        assert keys("a/b/3") == ["a/b/3.bin"]
        assert keys("zzz/") == []
        sizes = {info.key: info.size for info in storage.list()}
        assert sizes["a/b/3.bin"] == len(b"a/b/3.bin")

    def test_list_pages_give_the_listing_in_key_order(
        self, storage: Storage, seed: Callable[[str, bytes], None]
    ) -> None:
        keys = ["a/1.bin", "a/2.bin", "a/b/3.bin", "a-b.bin", "ab/4.bin", "c.bin", "c/5.bin"]
        for key in keys:
            seed(key, key.encode())
        pages = list(storage.list_pages(page_size=2))
        assert [len(page) for page in pages[:-1]] == [2] * (len(pages) - 1)
        assert [info.key for page in pages for info in page] == sorted(keys)
        assert [info.key for info in next(iter(storage.list_pages("a/", page_size=10)))] == [
            "a/1.bin",
            "a/2.bin",
            "a/b/3.bin",
        ]
        page, cursor = run_sync(storage.alist_page("a", "", 2))
        assert [info.key for info in page] and cursor
        assert [info.key for page in storage.list_pages("a", page_size=1) for info in page] == [
            "a-b.bin",
            "a/1.bin",
            "a/2.bin",
            "a/b/3.bin",
            "ab/4.bin",
        ]
        assert list(storage.list_pages("zzz/")) == []
        with pytest.raises(ValueError, match="page_size"):
            next(iter(storage.list_pages(page_size=0)))

    def test_download_is_atomic(self, storage: Storage, seed: Callable[[str, bytes], None], tmp_path: Path) -> None:
        data = _payload(3000, seed=3)
        seed("chunk-0.bin", data)
        destination = tmp_path / "cache" / "chunk-0.bin"
        assert storage.download("chunk-0.bin", destination) == 3000
        assert destination.read_bytes() == data
        destination.write_bytes(b"old")
        with pytest.raises(FileNotFoundError):
            storage.download("chunk-1.bin", destination)
        assert destination.read_bytes() == b"old"
        assert sorted(p.name for p in destination.parent.iterdir()) == ["chunk-0.bin"]  # no temp files

    def test_large_object_parallel_ranged_download(
        self, storage_factory: StorageFactory, seed: Callable[[str, bytes], None], tmp_path: Path
    ) -> None:
        storage = storage_factory(parallel_threshold=10_000, part_size=4096, max_concurrency=3)
        data = _payload(50_000, seed=5)
        seed("big.bin", data)
        destination = tmp_path / "downloads" / "big.bin"
        assert storage.download("big.bin", destination) == len(data)
        assert destination.read_bytes() == data
        assert [p.name for p in destination.parent.iterdir()] == ["big.bin"]

    def test_hashed_download_gives_the_files_checksum(
        self, storage_factory: StorageFactory, seed: Callable[[str, bytes], None], tmp_path: Path
    ) -> None:
        # Streamed in one GET, and in parallel ranged parts (a small part size makes them arrive out of order).
        storage = storage_factory(parallel_threshold=20_000, part_size=4096, max_concurrency=4)
        objects = {"small.bin": _payload(3000, seed=1), "big.bin": _payload(50_000, seed=2), "empty.bin": b""}
        for name, data in objects.items():  # all seeded first: some stores cache their listings
            seed(name, data)
        for name, data in objects.items():
            destination = tmp_path / "hashed" / name
            assert storage.download_hashed(name, destination) == (len(data), checksum_file(destination))
            assert destination.read_bytes() == data
        assert checksum_file(tmp_path / "hashed" / "big.bin") != checksum_file(tmp_path / "hashed" / "small.bin")

    def test_async_methods_and_sync_inside_a_running_loop(
        self, storage: Storage, seed: Callable[[str, bytes], None]
    ) -> None:
        seed("loop.bin", b"abc")

        async def main() -> tuple[bytes, bytes, bool]:
            # A sync twin called from inside a running loop must not deadlock or complain.
            return await storage.aget("loop.bin"), storage.get("loop.bin"), await storage.aexists("loop.bin")

        assert asyncio.run(main()) == (b"abc", b"abc", True)

    def test_keys_cannot_escape_the_root(self, storage: Storage) -> None:
        with pytest.raises(OSError, match=r"\.\."):
            storage.get("../outside.bin")

    # -- writing ----------------------------------------------------------------------------------
    def test_put_replaces(self, storage: Storage) -> None:
        if not self._writes_allowed(storage):
            return
        storage.put("x.bin", b"one")
        storage.put("x.bin", b"two!")
        assert storage.get("x.bin") == b"two!"
        assert storage.head("x.bin").size == 4

    def test_put_new_creates_only_what_is_not_there(self, storage: Storage) -> None:
        if not self._writes_allowed(storage):
            return
        assert storage.put_new("lock/a.json", b"first")
        assert not storage.put_new("lock/a.json", b"second")
        assert storage.get("lock/a.json") == b"first"
        storage.delete("lock/a.json")
        assert storage.put_new("lock/a.json", b"third")
        assert storage.get("lock/a.json") == b"third"
        assert [info.key for info in storage.list("lock/")] == ["lock/a.json"]  # no temporary file left

    def test_replace_if_swaps_only_the_version_it_was_given(self, storage: Storage) -> None:
        if not self._writes_allowed(storage):
            return
        storage.put("lock/b.json", b"stale")
        stale = storage.head("lock/b.json")
        assert storage.replace_if("lock/b.json", b"mine", stale)
        assert storage.get("lock/b.json") == b"mine"
        assert not storage.replace_if("lock/b.json", b"late", stale)  # a second taker of the stale one
        assert storage.get("lock/b.json") == b"mine"
        storage.delete("lock/b.json")
        assert not storage.replace_if("lock/b.json", b"gone", stale)
        assert not storage.exists("lock/b.json")
        assert [info.key for info in storage.list("lock/")] == []  # nothing left aside

    def test_delete_is_idempotent(self, storage: Storage) -> None:
        if not self._writes_allowed(storage):
            return
        storage.put("gone.bin", b"x")
        storage.delete("gone.bin")
        assert not storage.exists("gone.bin")
        storage.delete("gone.bin")
        storage.delete("never/was.bin")

    def test_copy(self, storage: Storage) -> None:
        if not self._writes_allowed(storage):
            return
        storage.put("src/a.bin", b"payload")
        storage.copy("src/a.bin", "dst/b.bin")
        assert storage.get("dst/b.bin") == b"payload"
        assert storage.get("src/a.bin") == b"payload"

    def test_upload_download_round_trip(self, storage: Storage, tmp_path: Path) -> None:
        if not self._writes_allowed(storage):
            return
        source = tmp_path / "source.bin"
        data = _payload(20_000, seed=9)
        source.write_bytes(data)
        storage.upload(source, "up/loaded.bin")
        assert storage.head("up/loaded.bin").size == len(data)
        storage.download("up/loaded.bin", tmp_path / "back.bin")
        assert (tmp_path / "back.bin").read_bytes() == data
        with pytest.raises(FileNotFoundError):
            storage.upload(tmp_path / "missing.bin", "up/missing.bin")

    # -- processes and secrets --------------------------------------------------------------------
    def test_pickle_round_trip_in_a_subprocess(
        self, storage: Storage, seed: Callable[[str, bytes], None], tmp_path: Path
    ) -> None:
        seed("pickled.bin", b"from the parent")
        storage.get("pickled.bin")  # live clients exist now; the pickle must not carry them
        clone = pickle.loads(pickle.dumps(storage))
        assert clone.get("pickled.bin") == b"from the parent"
        if not self.shared_between_processes:
            return
        blob = tmp_path / "storage.pkl"
        blob.write_bytes(pickle.dumps(storage))
        code = (
            "import pickle, sys; s = pickle.loads(open(sys.argv[1], 'rb').read()); "
            "sys.stdout.write(s.get('pickled.bin').decode())"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(blob)], check=False, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, f"exit {out.returncode}: {out.stderr}"
        assert out.stdout == "from the parent"

    # Python 3.12+ warns about fork with threads alive; surviving exactly that is what this tests.
    @pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
    def test_forked_child_after_parent_used_the_storage(
        self, storage: Storage, seed: Callable[[str, bytes], None]
    ) -> None:
        # fork copies the parent's memory, so even memory:// data is visible in the child.
        seed("forked.bin", b"seen by the child")
        assert storage.get("forked.bin") == b"seen by the child"  # the parent's client/runtime is live
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_read_in_fork, args=(storage, "forked.bin", queue))
        child.start()
        try:
            status, value, size = queue.get(timeout=60)
        finally:
            child.join(10)
            if child.is_alive():
                child.kill()
        assert status == "ok", value
        assert (value, size) == (b"seen by the child", len(b"seen by the child"))

    def test_secrets_stay_out_of_reprs_and_errors(self, storage: Storage, secrets: list[str]) -> None:
        texts = [repr(storage), str(storage), repr(vars(storage))]
        try:
            storage.get("no/such/secret-test.bin")
        except FileNotFoundError as exc:
            texts.append("".join(traceback.format_exception(exc)))
        for secret in secrets:
            for text in texts:
                assert secret not in text
