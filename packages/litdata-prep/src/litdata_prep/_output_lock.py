"""The output's lock: one job writes an output folder or prefix at a time.

The jobs: ``optimize``, ``map``, ``merge_datasets``, ``build_keys_index``, a ``dataset_update`` commit.

Two jobs writing one output at once would each publish an index naming only its own chunks, or
chunks the other deleted, and both report success. So a job holds ``.litdata-lock`` at the output's
root: created with :meth:`~litdata_io.Storage.put_new` (a hard link locally, ``If-None-Match: *`` in
a bucket), which one racing writer wins, and taken over when stale with
:meth:`~litdata_io.Storage.replace_if` (``If-Match``), so of two takers one wins. The lock names its
holder (host, pid, the process's start, pid namespace).

A waiting job takes the lock when it is released or stale: its holder ran on this host and pid
namespace and that process is gone, or, in a bucket, it was not rewritten (every
:data:`HEARTBEAT_S`) for :data:`STALE_S` seconds. A local output's lock is not rewritten (the thread
would make the workers start from a forkserver instead of a fork): a holder on another machine is
waited for, and the message names the file to delete if it is gone. A holder confirms the lock is
still its own before it publishes the index. The nodes of one multi-node job share one lock, named
by the job (its inputs' fingerprint and node count); the node that merges the index releases it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from litdata_prep._output import Output
from litdata_prep._staging import process_alive, process_start

__all__ = ["LOCK_KEY", "OutputLock", "OutputLockLostError", "hold_output"]

LOCK_KEY = ".litdata-lock"
HEARTBEAT_S = 5.0  # how often a holder rewrites its lock
STALE_S = 60.0  # a lock not rewritten for this long (as a waiter watches it) is a dead job's
POLL_S = 0.5  # how often a waiter looks at the lock
HOST = socket.gethostname()


def _pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``), "" where unknown.

    Containers on one machine may share its host name (Kubernetes pods with ``hostNetwork``) but
    not its pids: a pid is checked only by a process of the namespace that gave it.
    """
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


PID_NS = _pid_namespace()
# Held while the lock is rewritten, and by a thread that forks (workers started with "fork"): a
# forked worker never starts with a copy of the lock's thread holding a lock of the storage's.
_BEATING = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_BEATING.acquire, after_in_parent=_BEATING.release, after_in_child=_BEATING.release)


class OutputLockLostError(RuntimeError):
    """Another job took this job's output lock (this one looked dead); the index was not published."""


@dataclass(frozen=True)
class Holder:
    """What the lock says of the job holding it."""

    job: str  # the job's identity: unique per call, the same on every node of a multi-node job
    host: str
    pid: int
    pid_start: str
    started: str  # when the job took the lock, UTC, for people
    beat: int = 0
    pid_ns: str = ""  # the pid namespace of ``pid`` ("" in locks written before it was recorded)

    def pid_checkable(self) -> bool:
        """Whether this process can tell if the holder's process runs: same host, same pid namespace."""
        return self.host == HOST and self.pid_ns in ("", PID_NS)

    def describe(self) -> str:
        return f"job {self.job} (pid {self.pid} on {self.host}, started {self.started})"

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Holder | None:
        """The holder ``data`` names, or None if it names none (a lock being written, or not ours)."""
        try:
            obj = json.loads(data)
            return cls(
                job=str(obj["job"]),
                host=str(obj["host"]),
                pid=int(obj["pid"]),
                pid_start=str(obj["pid_start"]),
                started=str(obj["started"]),
                beat=int(obj["beat"]),
                pid_ns=str(obj.get("pid_ns", "")),
            )
        except (ValueError, TypeError, KeyError):
            return None


class OutputLock:
    """This job's hold on an output's lock (see the module docstring); made by :func:`hold_output`."""

    def __init__(self, output: Output, holder: Holder, what: str) -> None:
        self.output = output
        self.holder = holder
        self.what = what
        self._taken_by: Holder | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="litdata-output-lock", daemon=True)

    def _current(self) -> Holder | None:
        try:
            return Holder.decode(self.output.get(LOCK_KEY))
        except FileNotFoundError:
            return None

    def _beat(self) -> None:
        beat = 0
        while not self._stop.wait(HEARTBEAT_S):
            with _BEATING:  # no fork copies this thread mid-request (see _BEATING)
                try:
                    current = self._current()
                    if current is None or current.job != self.holder.job:  # taken over: confirm() says so
                        self._taken_by = current
                        return
                    beat = max(beat, current.beat) + 1
                    self.output.put(LOCK_KEY, Holder(**{**asdict(self.holder), "beat": beat}).encode())
                except Exception as err:  # a storage hiccup: the next beat tries again, well before STALE_S
                    print(f"{self.what}: rewriting the lock {self._url} failed ({err}); trying again", file=sys.stderr)

    @property
    def _url(self) -> str:
        return self.output.url_for(LOCK_KEY)

    def confirm(self) -> None:
        """Raise :class:`OutputLockLostError` unless the lock is still this job's (call before publishing)."""
        current = self._current()
        if current is None or current.job != self.holder.job:
            other = current or self._taken_by
            raise OutputLockLostError(
                f"{self.what}: the lock on {self.output.url} ({self._url}) is no longer this job's "
                f"({self.holder.describe()}): "
                + (f"{other.describe()} took it" if other is not None else "it was removed")
                + f" after this job did not rewrite it for {STALE_S:g} s (was it stopped?). This job's index was not "
                "published; run it again when the other job is done"
            )

    def release(self, last: bool) -> None:
        """Stop rewriting the lock; delete it if this node is the job's ``last`` and it is still the job's."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if last:
            with contextlib.suppress(Exception):  # a lock left behind is taken over as stale
                current = self._current()
                if current is not None and current.job == self.holder.job:
                    self.output.delete(LOCK_KEY)


def _stale(current: Holder, unchanged_for: float, beating: bool) -> bool:
    if current.pid_checkable():
        return not process_alive(current.pid, current.pid_start)
    return beating and unchanged_for >= STALE_S


@contextlib.contextmanager
def hold_output(output: Output, job: str | None, last: bool = True, what: str = "optimize") -> Iterator[OutputLock]:
    """Hold ``output``'s lock for the block, waiting for another job's to be released or stale.

    ``job`` is the identity a multi-node job's nodes share (None: one node); the ``last`` node releases
    the lock; ``what`` names the job in messages.
    """
    me = Holder(
        job=job or uuid.uuid4().hex,
        host=HOST,
        pid=os.getpid(),
        pid_start=process_start(os.getpid()),
        pid_ns=PID_NS,
        started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    )
    # Why it must know: a bucket's holder rewrites the lock; a local one is judged by pid (a thread would stop forks).
    beating = output.folder is None
    lock = _acquire(output, me, beating, what)
    if beating:
        lock._thread.start()  # pyright: ignore[reportPrivateUsage] - its own class's thread, started once held
    try:
        yield lock
    finally:
        lock.release(last)


def _acquire(output: Output, me: Holder, beating: bool, what: str) -> OutputLock:
    url = output.url_for(LOCK_KEY)
    seen: tuple[bytes, float] | None = None  # the lock's content, and since when it has not changed
    told = False
    while True:
        if output.put_new(LOCK_KEY, me.encode()):
            return OutputLock(output, me, what)
        try:
            version = output.head(LOCK_KEY)  # the version a takeover may replace (read before the content)
            data = output.get(LOCK_KEY)
        except FileNotFoundError:
            continue  # released meanwhile: try again
        current = Holder.decode(data)
        if current is not None and current.job == me.job:
            # Our own (a create whose answer was lost and was sent again), or another node's of this job.
            return OutputLock(output, me, what)
        now = time.monotonic()
        if seen is None or seen[0] != data:
            seen = (data, now)
        if current is None and now - seen[1] < STALE_S:
            time.sleep(POLL_S)  # not a lock this code writes, or one being written: look again
            continue
        if current is None or _stale(current, now - seen[1], beating):
            who = current.describe() if current is not None else "an unreadable lock"
            print(f"{what}: taking over the stale lock {url} of {who}", file=sys.stderr, flush=True)
            # Only if it is still that version: of two jobs taking over one stale lock, one wins.
            if output.replace_if(LOCK_KEY, me.encode(), version):
                return OutputLock(output, me, what)
            seen = None
            continue
        if not told:
            told = True
            if current.pid_checkable():
                then = "until it ends (its lock is taken over if its process is gone)"
            elif beating:
                then = f"(its lock is taken over if that job stops rewriting it for {STALE_S:g} s)"
            else:
                then = f"until it ends; if that job is gone (its machine or container stopped), delete {url}"
            print(
                f"{what}: {output.url} is being written by {current.describe()}; waiting {then}",
                file=sys.stderr,
                flush=True,
            )
        time.sleep(POLL_S)
