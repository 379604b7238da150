"""The local chunk cache: fetch a dataset's chunk files into a folder under a byte cap.

Publishing. A chunk is downloaded into a hidden staging folder next to its final place
(``.{name}.{inode}.partial/``), decompressed there if it is a whole-file compressed chunk
(``*.zstd.bin`` is published as ``*.bin``), then given its final name with a hard link that never
replaces a file already there (``os.replace`` where the filesystem has no hard links). A chunk file
is never visible half-written or still compressed; a crash leaves at worst a staging folder that
the next download of that chunk removes.

One download per chunk. Within a process, the first caller downloads and the others wait on its
future. Across processes, the downloader holds an exclusive ``flock`` on ``.{name}.lock``; the
others block on it (the kernel releases a crashed holder's lock), then find the published file.
The holder deletes the lock file before releasing it, and lockers check that the path still names
the inode they locked. A stopped holder (SIGSTOP, a debugger) keeps its lock, so a waiter takes its
download over after ``LITDATA_DOWNLOAD_STALL_S`` without progress (``_stall``).

Readers pin. Every reader holds a shared ``flock`` on the chunk file while it uses it
(:meth:`ChunkCache.acquire` / :meth:`ChunkCache.release`, one descriptor per chunk per process).
Eviction deletes a chunk only after taking ``LOCK_EX | LOCK_NB`` on it, which fails while any
process holds a shared lock; a reader that locked a file just unlinked sees that the path no longer
names its inode and fetches again. A download is pinned before it is published, so nobody evicts
it between publication and use.

Eviction. Every visible file counts towards ``max_cache_size``, indexes included, and so does every
download in flight in any process: it writes the bytes it will add into the lock file it holds,
counted while the lock is held. Hidden files (the ledger, locks, version marks, staging folders)
are bookkeeping. Over the cap, unpinned chunks are deleted (never an index), consumed ones first
(:meth:`ChunkCache.mark_consumed` sets the mtime to 0, which every process sees), then the oldest.
Pinned chunks are never deleted, so the chunks in use and the downloads in flight may exceed the cap.

A full disk. Other files can fill the disk under the cap. A download that fails for a full disk
(ENOSPC, EDQUOT) records in the ledger the bytes the disk has for the cache (the disk cap every
process keeps to from then on), evicts down to it, and downloads again; with no room to make it
retries for ``_ROOM_WAIT_S``, then raises a :class:`ChunkDownloadError` naming the folder.

The ledger. Counting the folder costs a ``stat`` per file, too much to do per chunk read, so the
folder's total lives in ``.cache-bytes``, which every process updates under ``flock`` as it
reserves, publishes, abandons and deletes (``_ledger``). The folder is counted again only when the
ledger says the cap is exceeded, is missing, or is a minute old, which also corrects what crashes
or hand deletions left wrong; each recount frees 1/50 of the cap beyond what is needed, so a full
cache is not recounted per chunk. A race can only make the ledger count too much, never too little.

Versions. With ``version``, chunks live in ``cache_dir/<version>/`` (``_versions``); the cap covers ``cache_dir``.

Sizes and checksums. A cached chunk whose size is not the index's (``cached_chunk_sizes``) is
deleted and fetched again, and a download of the wrong size is never published. When the index
records checksums, a download is hashed as its bytes arrive, before it is decompressed or published
(:meth:`ChunkCache._fetch_verified`). A chunk already cached is hashed the first time each process
pins it (``ChunkCache._whole``), so a byte altered on disk is caught before its samples are read.

Fork. Descriptors and in-process state are reset in a forked child, so a child never inherits its
parent's pins, downloads in flight or a lock held by a thread. Locking needs ``fcntl`` (POSIX).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import shutil
import threading
import time
import weakref
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litdata_format import ChecksumError, ChunkInfo, verify_file
from litdata_format.internal import (
    cached_chunk_sizes,
    decompress_file,
    expected_checksum,
    plain_chunk_name,
)
from litdata_io._cache._clear import CacheClearResult, clear_cache
from litdata_io._cache._disk import free_bytes, is_disk_full, resolve_max_cache_size
from litdata_io._cache._ledger import STATE_WIDTH, Ledger, LedgerState, parse_ledger, write_disk_cap, write_ledger
from litdata_io._cache._locks import (
    LEDGER,
    LOCK_SUFFIX,
    SH,
    check_own_folders,
    clear_stale_staging,
    delete_if_unused,
    flock,
    make_cache_folder,
    open_pinned,
    release_lock_file,
    reservation,
    reserve,
    same_file,
    staging_path,
)
from litdata_io._cache._stall import DownloadStalledError, Superseded, lock_download, publish_once
from litdata_io._cache._versions import check_version, claim_version
from litdata_io._instrument._probe import probe
from litdata_io._processes import _process
from litdata_io._processes._loop import run_sync
from litdata_io._storage._retry import backoff_delay

if TYPE_CHECKING:
    from litdata_io._storage._interface import Storage

__all__ = ["ChunkCache", "ChunkDownloadError"]

_log = logging.getLogger("litdata_io")
_RECOUNT_S = 60.0  # the ledger is recounted from the folder at least this often
_MARGIN = 50  # eviction frees up to 1/50 of the cap beyond what is needed, so the next recount waits
_ROOM_WAIT_S = 10.0  # a download that finds no room to make on a full disk tries again this long, then fails


class ChunkDownloadError(OSError):
    """A chunk could not be fetched into the cache; the message names its URL and the cause."""


def _is_evictable(name: str) -> bool:
    """Whether a visible file of a cache folder is cached data eviction may delete (not an index)."""
    return not name.endswith(".json") and ".json." not in name


@dataclass
class _Pin:
    fd: int
    count: int


@dataclass
class _ProcessState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    pins: dict[str, _Pin] = field(default_factory=dict[str, _Pin])
    inflight: dict[str, concurrent.futures.Future[None]] = field(
        default_factory=dict[str, concurrent.futures.Future[None]]
    )
    # (st_dev, st_ino) of files checked here
    verified: set[tuple[int, int]] = field(default_factory=set[tuple[int, int]])


_LIVE_CACHES: weakref.WeakSet[ChunkCache] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for cache in list(_LIVE_CACHES):
        cache._forget_parent_state()  # pyright: ignore[reportPrivateUsage]  # the class's own fork hook


_process.on_fork_in_child(_reset_after_fork)


class ChunkCache:
    """Chunk files of one dataset, fetched from ``storage`` into ``cache_dir`` under a byte cap.

    Safe to share between threads and between processes that use the same ``cache_dir`` (see the
    module docstring for how). Picklable: a copy in another process starts with no pins.

    Args:
        cache_dir: the local folder for this dataset's chunks (created if missing).
        storage: where the chunks come from; chunk file names are keys relative to its root.
        max_cache_size: the byte budget; see :func:`resolve_max_cache_size` for the forms.
        compression: the dataset's whole-file compression (``index.json``'s ``config.compression``);
            chunks named ``*.{compression}.bin`` are stored decompressed as ``*.bin``.
        version: the subfolder of ``cache_dir`` for this dataset's chunks (from
            :func:`~litdata_io.dataset_version`); other versions of the same URL in ``cache_dir``
            are cleared. ``None`` keeps the chunks directly in ``cache_dir``.
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str],
        storage: Storage,
        max_cache_size: int | float | str | None = None,
        *,
        compression: str | None = None,
        version: str | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir).expanduser().absolute()
        self.storage = storage
        self.compression = compression
        self.version = check_version(version) if version is not None else None
        self.max_cache_size = resolve_max_cache_size(max_cache_size, self.cache_dir)
        _refuse_source_folder(storage, self.cache_dir)
        make_cache_folder(self.cache_dir)
        self._ledger = Ledger(self.cache_dir / LEDGER)
        self._state = _ProcessState()
        _LIVE_CACHES.add(self)
        if self.version is not None:
            claim_version(self.cache_dir, self.version, self.storage.url)

    def __repr__(self) -> str:
        return f"ChunkCache({str(self.cache_dir)!r}, url={self.storage.url!r}, max_cache_size={self.max_cache_size})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_state"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._state = _ProcessState()
        _LIVE_CACHES.add(self)

    def _forget_parent_state(self) -> None:
        # In a forked child; closing our duplicates of the parent's descriptors leaves its locks alone.
        for pin in self._state.pins.values():
            with contextlib.suppress(OSError):
                os.close(pin.fd)
        self._state = _ProcessState()

    def name_for(self, info: ChunkInfo) -> str:
        """The file name ``info`` has in the cache, relative to ``cache_dir`` (decompressed, under its version).

        Args:
            info: the chunk's entry in the index.
        """
        name = plain_chunk_name(info, self.compression)
        return name if self.version is None else f"{self.version}/{name}"

    def path_for(self, info: ChunkInfo) -> Path:
        """Where ``info`` is (or will be) in the cache.

        Args:
            info: the chunk's entry in the index.
        """
        return self.cache_dir / self.name_for(info)

    def is_cached(self, info: ChunkInfo) -> bool:
        """Whether the chunk is in the cache right now, whole (it may be evicted later unless acquired).

        Args:
            info: the chunk's entry in the index.
        """
        try:
            return _intact(info, self.path_for(info).stat().st_size)
        except (FileNotFoundError, NotADirectoryError):
            return False

    async def aensure(self, info: ChunkInfo) -> Path:
        """Make the chunk present in the cache and return its path, without pinning it (see :meth:`aacquire`).

        Args:
            info: the chunk's entry in the index.
        """
        path = self.path_for(info)
        if self.is_cached(info):
            return path
        await self._afetch(info, pin=False)
        return path

    def ensure(self, info: ChunkInfo) -> Path:
        """Sync twin of :meth:`aensure`."""
        return self.path_for(info) if self.is_cached(info) else run_sync(self.aensure(info))

    async def aacquire(self, info: ChunkInfo) -> Path:
        """Make the chunk present and pin it until a matching :meth:`release`; return its path.

        Args:
            info: the chunk's entry in the index.
        """
        if self._pin_present(info):
            return self.path_for(info)
        await self._afetch(info, pin=True)
        return self.path_for(info)

    def acquire(self, info: ChunkInfo) -> Path:
        """Sync twin of :meth:`aacquire`."""
        if self._pin_present(info):
            return self.path_for(info)
        return run_sync(self.aacquire(info))

    def release(self, info: ChunkInfo) -> None:
        """Undo one :meth:`acquire`; the chunk can be evicted once no process uses it.

        Args:
            info: the chunk given to :meth:`acquire`.
        """
        name = self.name_for(info)
        state = self._state
        with state.lock:
            pin = state.pins.get(name)
            if pin is None:
                raise ValueError(f"chunk {name} in {self.cache_dir} is not acquired by this process")
            pin.count -= 1
            if pin.count:
                return
            del state.pins[name]
        # Closing (not LOCK_UN) releases only this process's lock even if a child shares the fd.
        os.close(pin.fd)

    @contextlib.contextmanager
    def use(self, info: ChunkInfo) -> Generator[Path, None, None]:
        """``with cache.use(info) as path:`` acquire the chunk for the block.

        Args:
            info: the chunk's entry in the index.
        """
        path = self.acquire(info)
        try:
            yield path
        finally:
            self.release(info)

    def _pin_present(self, info: ChunkInfo) -> bool:
        name = self.name_for(info)
        state = self._state
        with state.lock:
            pin = state.pins.get(name)
            if pin is not None:
                pin.count += 1
                return True
        fd = open_pinned(self.cache_dir / name)
        if fd is None:
            return False
        if not self._whole(info, fd):
            os.close(fd)  # truncated or damaged: the download replaces it
            return False
        self._add_pin(name, fd)
        return True

    def _whole(self, info: ChunkInfo, fd: int) -> bool:
        """Whether the cached file open as ``fd`` has the index's size and (once per process) checksum."""
        stat = os.fstat(fd)
        if not _intact(info, stat.st_size):
            return False
        key = (stat.st_dev, stat.st_ino)
        if key in self._state.verified or expected_checksum(info, plain=True) is None:
            return True
        try:
            verify_file(fd, info, str(self.cache_dir / self.name_for(info)), plain=True)
        except ChecksumError as err:
            probe.instant("damaged", "delete", chunk=info.filename, found=err.found, expected=err.expected)
            return False
        self._state.verified.add(key)
        return True

    def _add_pin(self, name: str, fd: int) -> None:
        state = self._state
        with state.lock:
            pin = state.pins.get(name)
            if pin is None:
                state.pins[name] = _Pin(fd, 1)
                return
            pin.count += 1
        os.close(fd)  # another thread pinned it meanwhile: one descriptor per chunk is enough

    async def _afetch(self, info: ChunkInfo, pin: bool) -> None:
        name = self.name_for(info)
        stuck: float | None = None  # since when the disk has had no room for this chunk
        while True:
            if pin and self._pin_present(info):
                return
            if not pin and self.is_cached(info):
                return
            state = self._state
            with state.lock:
                leading = name not in state.inflight
                if leading:
                    state.inflight[name] = concurrent.futures.Future()
                    state.inflight[name].set_running_or_notify_cancel()  # nobody can cancel it for the others
                mine = state.inflight[name]
            if not leading:  # wait for this process's download, then look again (it may have failed)
                doing = f"waiting for another thread's download of {self.storage.url_for(info.filename)}"
                with probe.span("download_wait", "lock", doing):
                    await asyncio.wrap_future(mine)
                continue
            try:
                fd = await self._download(info, name)
            except Superseded:  # another process published it first: use that copy
                _finish(state, name, mine, None)
                continue
            except asyncio.CancelledError:
                _finish(state, name, mine, None)  # the waiters try again themselves
                raise
            except BaseException as err:
                if is_disk_full(err):
                    _finish(state, name, mine, None)  # the waiters try again themselves
                    stuck = await self._make_room_on_disk(info, err, stuck)  # or an error saying why there is none
                    continue
                _finish(state, name, mine, err)
                raise
            if pin:
                self._add_pin(name, fd)
            else:
                os.close(fd)
            _finish(state, name, mine, None)
            return

    async def _download(self, info: ChunkInfo, name: str) -> int:
        """Fetch ``info`` under the cross-process lock; a descriptor pinning it (:class:`Superseded`: taken over)."""
        final = self.cache_dir / name
        final.parent.mkdir(parents=True, exist_ok=True)
        check_own_folders(self.cache_dir, final.parent)
        lock_path = final.parent / f".{final.name}{LOCK_SUFFIX}"
        url = self.storage.url_for(info.filename)
        try:
            lock_fd = await lock_download(lock_path, final, url, self._ledger.locked)
        except DownloadStalledError as err:
            raise ChunkDownloadError(str(err)) from err
        staging = staging_path(final, os.fstat(lock_fd).st_ino)
        try:
            reserve(lock_fd, 0)  # names this process to the ones that wait for it
            fd = open_pinned(final)
            if fd is not None:
                if self._whole(info, fd):  # another process published it while we waited
                    return fd
                size = os.fstat(fd).st_size
                os.close(fd)
                # Not the size or bytes the index says: fetch it again (a reader elsewhere keeps its copy).
                probe.instant("refetch", "delete", chunk=info.filename, bytes=size)
                with contextlib.suppress(FileNotFoundError):
                    final.unlink()
            clear_stale_staging(final, os.fstat(lock_fd).st_ino)  # left by crashed downloads
            staging.mkdir()
            # The lock file first, then the ledger: a recount in between counts this twice, never not at all.
            reserve(lock_fd, info.chunk_bytes)
            self._ledger.add(info.chunk_bytes)
            size = 0
            try:
                fd = await self._fetch_and_publish(info, staging, final)
                size = os.fstat(fd).st_size
                return fd
            except Exception as err:
                if same_file(lock_fd, lock_path) is None and self.is_cached(info):
                    # Taken over while this process was stopped, and published by the taker: our
                    # failure (a connection that timed out meanwhile, say) no longer matters.
                    raise Superseded(str(err)) from err
                raise
            finally:  # the reservation becomes the published file, or nothing (still under the lock)
                self._ledger.add(size - info.chunk_bytes)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            release_lock_file(lock_fd, lock_path)

    async def _fetch_and_publish(self, info: ChunkInfo, staging: Path, final: Path) -> int:
        """Download ``info`` into ``staging``, publish it as ``final``; return a descriptor pinning it."""
        url = self.storage.url_for(info.filename)
        with probe.span("cap_wait", "lock", lambda: f"waiting on the cache cap ({self.cache_dir}) to fetch {url}"):
            self.evict()  # counts this download's reservation and every other one in flight
        try:
            fetched = staging / Path(info.filename).name
            ready = staging / final.name
            await self._fetch_verified(info, fetched, url, plain=fetched == ready)
            if fetched != ready:
                with probe.span(
                    "decompress", "decompress", lambda: f"decompress {url}", chunk=info.filename, bytes=info.chunk_bytes
                ):
                    await _decompress_in_thread(fetched, ready, url, cached_chunk_sizes(info))
        except (asyncio.CancelledError, ChunkDownloadError):
            raise
        except Exception as err:
            if url in str(err):
                raise
            raise ChunkDownloadError(f"downloading chunk {url} failed: {type(err).__name__}: {err}") from err
        size = ready.stat().st_size
        if not _intact(info, size):
            raise ChunkDownloadError(
                f"chunk {info.filename} ({url}) has {size} bytes but index.json says {info.chunk_bytes}: the "
                "dataset was probably rewritten while being read, or its index does not belong to these chunks; "
                "read it again with a new StreamingDataset (or rewrite it whole)"
            )
        fd = os.open(ready, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            flock(fd, SH)  # pinned before anyone can see it
            publish_once(ready, final)
        except BaseException:
            os.close(fd)
            raise
        if same_file(fd, final) is None:
            # A writer of a cancelled attempt swapped the staged file under us: pin what is there.
            os.close(fd)
            fd = open_pinned(final)
            if fd is None:
                raise ChunkDownloadError(f"chunk {url}: {final} vanished right after it was published")
            return fd
        stat = os.fstat(fd)
        self._state.verified.add((stat.st_dev, stat.st_ino))  # checked as downloaded (before decompressing)
        return fd

    async def _fetch_verified(self, info: ChunkInfo, fetched: Path, url: str, plain: bool) -> None:
        """Download ``info`` to ``fetched`` and check it against the index's size (if ``plain``) and checksum.

        A download that disagrees is weighed against a HEAD: a body cut short in transit is fetched
        again within the retry budget, an object of another size was rewritten, and a checksum
        mismatch is fetched once more, then fails naming both hashes.
        """
        expected = expected_checksum(info)
        settings = self.storage.settings
        started, tries, mismatches = time.monotonic(), 0, 0
        while True:
            tries += 1
            with probe.span("download", "download", lambda: f"download {url}", chunk=info.filename) as span:
                if expected is None:
                    size, found = await self.storage.adownload(info.filename, fetched), None
                else:  # hashed as the bytes arrive, where the storage can: no second pass over the file
                    size, found = await self.storage.adownload_hashed(info.filename, fetched)
                span.set(bytes=size)
            if found == expected and not (plain and not _intact(info, size)):
                return
            stored = (await self.storage.ahead(info.filename)).size
            if plain and not _intact(info, stored):
                raise ChunkDownloadError(
                    f"chunk {info.filename} ({url}) has {stored} bytes but index.json says {info.chunk_bytes}: the "
                    "dataset was rewritten while being read, or its index does not belong to these chunks; "
                    "read it again with a new StreamingDataset (or rewrite it whole)"
                )
            if size != stored:  # cut short (or padded) in transit: the object itself is whole
                delay = backoff_delay(tries, settings)
                if not settings.allows_retry(tries, time.monotonic() - started, delay):
                    raise ChunkDownloadError(
                        f"chunk {info.filename} ({url}): {tries} downloads received {size} of its {stored} bytes "
                        f"(the connection dropped mid-body); the retry budget ({settings.budget()}) ran out: "
                        "raise it or check the network and the server"
                    )
                probe.instant("refetch", "delete", chunk=info.filename, bytes=size, stored=stored)
                fetched.unlink()
                await asyncio.sleep(delay)
                continue
            mismatches += 1
            if mismatches == 2:
                raise ChunkDownloadError(
                    f"chunk {info.filename} ({url}): downloaded twice, its bytes hash to {found} but "
                    f"index.json records {expected}; the stored object is damaged or belongs to another "
                    "version of the dataset: rewrite the chunk (or the dataset) at the source"
                )
            probe.instant("refetch", "delete", chunk=info.filename, found=found, expected=expected)
            fetched.unlink()

    def _scan(
        self, locks: list[Path] | None = None, staged: list[int] | None = None
    ) -> list[tuple[Path, int, int, bool]]:
        """(path, size, mtime_ns, evictable) per visible file; lock files to ``locks``, staged sizes to ``staged``."""
        found: list[tuple[Path, int, int, bool]] = []
        stack = [self.cache_dir]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    if locks is not None and entry.name.endswith(LOCK_SUFFIX):
                        locks.append(Path(entry.path))
                    elif staged is not None and entry.name.endswith(".partial"):
                        staged.extend(_sizes(Path(entry.path)))
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    else:
                        stat = entry.stat(follow_symlinks=False)
                        found.append((Path(entry.path), stat.st_size, stat.st_mtime_ns, _is_evictable(entry.name)))
                except FileNotFoundError:
                    continue
        return found

    def size(self) -> int:
        """Bytes counted against the cap in ``cache_dir`` right now (chunks and indexes), from every process."""
        return sum(entry[1] for entry in self._scan())

    def mark_consumed(self, info: ChunkInfo) -> None:
        """Say the chunk has been read: it is evicted first, once no process uses it.

        Evicts at once if the cache is over its cap.

        Args:
            info: the chunk's entry in the index.
        """
        with contextlib.suppress(FileNotFoundError):
            os.utime(self.path_for(info), ns=(0, 0), follow_symlinks=False)
        self.evict()

    def evict(self, incoming: int = 0) -> int:
        """Delete unpinned chunks, consumed then oldest first, until ``incoming`` more bytes fit.

        Downloads in flight in any process count with the bytes they will add. The cap is
        ``max_cache_size``, or less once the disk was found full.

        Args:
            incoming: bytes about to be added besides those downloads.

        Returns:
            The bytes freed. Chunks in use anywhere are kept, even if that leaves the cache over cap.
        """
        known = self._ledger.read()
        if _fits(known, self._cap(known) - max(incoming, 0)):
            return 0
        with self._ledger.locked() as fd:  # the folder's true total, written back when done
            known = parse_ledger(os.pread(fd, STATE_WIDTH, 0))
            cap = self._cap(known)
            budget = cap - max(incoming, 0)
            if _fits(known, budget):
                return 0  # another process counted while we waited for the lock
            entries, total = self._count()
            freed = self._shrink(entries, total, budget, cap // _MARGIN)
            write_ledger(fd, total - freed, time.time())
        return freed

    def _cap(self, known: LedgerState | None) -> int:
        """The cap in force: ``max_cache_size``, or less once the disk was found full (the ledger's disk cap)."""
        if known is None or known.disk_cap is None:
            return self.max_cache_size
        return min(self.max_cache_size, known.disk_cap)

    def _count(self, staged: list[int] | None = None) -> tuple[list[tuple[Path, int, int, bool]], int]:
        """Every visible file (as :meth:`_scan`), and the folder's total with the downloads in flight."""
        locks: list[Path] = []
        entries = self._scan(locks, staged)
        return entries, sum(entry[1] for entry in entries) + sum(reservation(lock) for lock in locks)

    def _shrink(self, entries: list[tuple[Path, int, int, bool]], total: int, budget: int, margin: int) -> int:
        """Under the ledger's lock, delete unpinned chunks (consumed, then oldest) to ``budget``; the bytes freed.

        Past the budget, only chunks that fit in ``margin`` more go.
        """
        if total <= budget:
            return 0
        with self._state.lock:
            pinned = set(self._state.pins)
        low = budget - margin
        freed = 0
        for path, size, _, evictable in sorted(entries, key=lambda entry: entry[2]):
            if not evictable:  # an index: its dataset needs it
                continue
            # Enough room for what comes; then go on into the margin with chunks that fit in it.
            if total - freed <= budget and total - freed - size < low:
                break
            if path.relative_to(self.cache_dir).as_posix() in pinned:
                continue
            if delete_if_unused(path):
                probe.instant("delete", "delete", chunk=path.name, bytes=size)
                freed += size
        return freed

    async def _make_room_on_disk(self, info: ChunkInfo, error: BaseException, stuck: float | None) -> float | None:
        """The disk filled up under a download of ``info``: lower the cap to what fits there, make room.

        The lowered cap (its files, its downloads so far and the free space) is in the ledger, so
        every process makes room before its own downloads instead of taking what this one freed.
        With too little room to make, it waits for readers to release chunks for ``_ROOM_WAIT_S``
        since ``stuck``, then raises a :class:`ChunkDownloadError`. Returns the ``stuck`` of the next
        call: since when there has been no room (None: there is room now).
        """
        url = self.storage.url_for(info.filename)
        # A whole-file compressed chunk is in its staging folder twice while it is inflated.
        need = info.chunk_bytes * (1 if Path(info.filename).name == Path(self.name_for(info)).name else 2)
        with self._ledger.locked() as fd:
            known = parse_ledger(os.pread(fd, STATE_WIDTH, 0))
            staged: list[int] = []
            entries, total = self._count(staged)
            free = free_bytes(self.cache_dir)
            cached = sum(entry[1] for entry in entries)
            room = cached + sum(staged) + free
            disk_cap = room if known is None or known.disk_cap is None else min(known.disk_cap, room)
            lowered = known is None or disk_cap != known.disk_cap
            if lowered:
                write_disk_cap(fd, disk_cap)
            cap = min(self.max_cache_size, disk_cap)
            freed = self._shrink(entries, total, cap - need, cap // _MARGIN)
            write_ledger(fd, total - freed, time.time())
        if lowered:
            _log.warning(
                "the disk of the chunk cache %s is full with %d bytes cached (max_cache_size is %d): the cache "
                "now keeps to the %d bytes the disk has for it, in every process using it, and deleted %d bytes "
                "of chunks; free space on that disk, or lower max_cache_size, to avoid this",
                self.cache_dir,
                cached,
                self.max_cache_size,
                cap,
                freed,
            )
        if (lowered or freed) and total - freed + need <= cap:
            return None  # room made: download again at once
        now = time.monotonic()
        stuck = now if stuck is None else stuck
        if need <= room and now - stuck < _ROOM_WAIT_S:
            await asyncio.sleep(0.1)
            return stuck
        raise ChunkDownloadError(
            f"no space left for chunk {url} ({need} bytes) in the cache {self.cache_dir}: its disk has "
            f"{free} bytes free, and of the {cached} bytes cached only {freed} could be deleted (the others are "
            "indexes or chunks in use by a reader). Free space on that disk, or set cache_dir to a folder on "
            f"a larger one (max_cache_size is {self.max_cache_size} bytes)"
        ) from error

    def clear(self) -> CacheClearResult:
        """Delete everything cached for this dataset that no process is using."""
        return clear_cache(self.cache_dir)

    def close(self) -> None:
        """Release every pin this process holds in this cache."""
        state = self._state
        with state.lock:
            pins, state.pins = list(state.pins.values()), {}
        for pin in pins:
            os.close(pin.fd)


def _intact(info: ChunkInfo, size: int) -> bool:
    """Whether a stored chunk of ``size`` bytes is whole, as far as the index tells."""
    sizes = cached_chunk_sizes(info)
    return not sizes or size in sizes


def _fits(known: LedgerState | None, budget: int) -> bool:
    """Whether a ledger's total is within ``budget`` and was counted less than a minute ago."""
    return known is not None and known.total <= budget and time.time() - known.counted < _RECOUNT_S


def _sizes(folder: Path) -> list[int]:
    """The sizes of the files in ``folder`` (a download's staging folder; gone meanwhile: none)."""
    sizes: list[int] = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(folder):
            with contextlib.suppress(FileNotFoundError):
                sizes.append(entry.stat(follow_symlinks=False).st_size)
    return sizes


def _finish(
    state: _ProcessState, name: str, future: concurrent.futures.Future[None], error: BaseException | None
) -> None:
    with state.lock:
        if state.inflight.get(name) is future:
            del state.inflight[name]
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


async def _decompress_in_thread(source: Path, target: Path, url: str, sizes: tuple[int, ...]) -> None:
    """Inflate ``source`` into ``target`` in a thread, streaming and bounded by the sizes the index allows."""
    finished = threading.Event()

    def work() -> None:
        try:
            decompress_file(source, target, url, sizes)
            source.unlink()
        finally:
            finished.set()

    future = asyncio.get_running_loop().run_in_executor(None, work)
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        # Let the thread finish before the chunk's lock is released, so no writer outlives it.
        finished.wait()
        raise


def _refuse_source_folder(storage: Storage, cache_dir: Path) -> None:
    """Eviction deletes files: never let the cache folder hold the dataset's own local files."""
    url = storage.url
    if "://" in url and not url.startswith("file://"):
        return
    source = Path(url.removeprefix("file://").removeprefix("local:")).expanduser().resolve()
    cache = cache_dir.resolve()
    if source == cache or cache in source.parents:
        raise ValueError(
            f"cache_dir {cache_dir} holds the dataset's own files ({url}); the cache evicts files, so give "
            "it a folder of its own (or read a local dataset without a cache)"
        )
