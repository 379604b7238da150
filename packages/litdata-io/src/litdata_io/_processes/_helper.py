"""The obstore helper: a child process that runs obstore for a process that must not run it itself.

A process whose obstore placement is ``"helper"`` (see :mod:`litdata_io._processes._process`) sends
each obstore storage call here instead of running it. The helper is started on the first such call
with one end of a socket pair: a plain ``os.fork()`` of the process, which has everything imported
already but obstore and so starts in milliseconds (or a fresh interpreter where that is unsafe, see
:func:`_fork_helper`). It sees the parent's environment, so it finds every credential the parent would.

Protocol: frames of an 8-byte length and a pickle of one message. The client sends a :class:`_Call`
(a call id, the storage pickled once, so the helper keeps one client per storage, and a
:class:`~litdata_io._processes._requests.Request`) or a :class:`_Cancel`; the helper answers each
call with a :class:`_Reply`. Downloads and uploads pass file paths: no file's bytes cross the socket.

Client side. The connection lives on the process's shared loop. If the helper dies, the calls in
flight fail with a :class:`StorageError` naming its exit code and the URL, and the next call starts a
new helper. A forked child closes its copy of the socket, so the helper sees end-of-file when its
own parent goes. When a variable a store client may read changes (see :func:`_environment`), the
next call starts a new helper, and the old one finishes its calls and exits.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from litdata_io._processes import _process
from litdata_io._processes._loop import io_loop
from litdata_io._processes._requests import Request
from litdata_io._storage._failures import StorageError

__all__ = ["call_in_helper"]

_HEADER = struct.Struct("!Q")
_MAX_STORES = 64  # clients the helper keeps; a long test session opens many storages, a job a few
_SIGKILL = 9
_R = TypeVar("_R")


@dataclass(frozen=True)
class _Call:
    """Run ``request`` against the storage pickled as ``storage``; answered by a :class:`_Reply` of ``call_id``."""

    call_id: int
    storage: bytes
    request: Request[Any]


@dataclass(frozen=True)
class _Cancel:
    """The caller gave up on call ``call_id``: cancel it (no reply)."""

    call_id: int


@dataclass(frozen=True)
class _Reply:
    """The outcome of call ``call_id``: its result (``ok``) or the exception it raised."""

    call_id: int
    ok: bool
    value: Any


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))


def _frame(payload: bytes) -> list[bytes]:
    return [_HEADER.pack(len(payload)), payload]


# -- the helper's side ----------------------------------------------------------------------------
def _pickled(message: _Call | _Cancel | _Reply) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _reply(call_id: int, ok: bool, value: Any) -> bytes:
    """The pickled reply; an exception that does not survive pickling becomes its text."""
    if ok:
        return _pickled(_Reply(call_id, True, value))
    try:
        data = _pickled(_Reply(call_id, False, value))
        pickle.loads(data)  # an exception with a custom __init__ may pickle but not unpickle
        return data
    except Exception:
        error = StorageError(f"{type(value).__name__}: {value}", url=str(getattr(value, "url", "")))
        return _pickled(_Reply(call_id, False, error))


async def _serve(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    stores: dict[bytes, Any] = {}
    tasks: dict[int, asyncio.Task[None]] = {}

    async def run(call: _Call) -> None:
        try:
            storage = stores.get(call.storage)
            if storage is None:
                if len(stores) >= _MAX_STORES:
                    del stores[next(iter(stores))]
                storage = stores[call.storage] = pickle.loads(call.storage)
            result, ok = await call.request.run(storage), True
        except asyncio.CancelledError:
            return  # the caller gave up on it: no reply
        except BaseException as exc:
            result, ok = exc, False
        finally:
            tasks.pop(call.call_id, None)
        writer.writelines(_frame(_reply(call.call_id, ok, result)))
        await writer.drain()

    try:
        while True:
            message = await _read_frame(reader)
            if isinstance(message, _Cancel):
                task = tasks.get(message.call_id)
                if task is not None:
                    task.cancel()
            elif isinstance(message, _Call):
                tasks[message.call_id] = asyncio.create_task(run(message))
            else:
                raise ValueError(f"the obstore helper runs storage requests only, not {type(message).__name__}")
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the parent closed its end or died: nobody is waiting for the rest
    for task in list(tasks.values()):
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)


def _serve_until_eof(fd: int) -> NoReturn:
    # Ctrl-C in a terminal reaches the whole process group; the parent decides what it means,
    # and the helper ends when the parent does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _process.serve_obstore_here()
    asyncio.run(_serve(fd))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalization: obstore's runtime threads may still be winding down, and a
    # thread taking the GIL from a finalizing interpreter aborts the process.
    os._exit(0)


def main(argv: list[str]) -> None:
    """The helper as a fresh interpreter: serve the socket ``argv[1]`` until its other end closes."""
    _serve_until_eof(int(argv[1]))


def _become_helper(fd: int, fresh: bool) -> NoReturn:
    """The forked child: drop what belongs to the parent, then serve ``fd`` (or exec a fresh interpreter that does).

    Every way out is ``os._exit``: nothing returns into the parent's stack or runs its ``atexit`` handlers.
    """
    try:
        _leave_parent(fd)
        if fresh:
            os.set_inheritable(fd, True)
            os.execv(sys.executable, [sys.executable, "-m", "litdata_io._processes._helper", str(fd)])
        _serve_until_eof(fd)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(1)


def _leave_parent(keep: int) -> None:
    """Signals, descriptors and stdio of the forked child: nothing of the parent's may act here."""
    for signum in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            if callable(signal.getsignal(signum)):  # a handler of the parent's (a trainer's SIGTERM checkpoint)
                signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)
    # Every inherited descriptor but the socket and stdout/stderr is pointed at /dev/null: the parent's
    # pipes, sockets and flock-ed files must not stay open here, and closing them would let an
    # inherited object still naming a descriptor reach a new one of the same number.
    null = os.open(os.devnull, os.O_RDWR)
    folder = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    for fd in sorted({int(name) for name in os.listdir(folder)} - {1, 2, keep, null}):
        with contextlib.suppress(OSError):
            os.fstat(fd)  # the listing's own descriptor is closed by now
            os.dup2(null, fd, inheritable=fd == 0)
    os.close(null)
    # Fresh stdio objects: the parent's may be a notebook's stream, or locked by a thread that is gone.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115


# -- the client's side ----------------------------------------------------------------------------
class _Child:
    """The helper process as its parent waits for it (``pid`` and ``wait`` as in ``subprocess.Popen``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()  # the reader task and the exit hook may both wait

    def wait(self, timeout: float | None = None) -> int:
        """The exit code, once the helper has exited (polled: two threads may wait at once), or ``TimeoutExpired``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while True:
            with self._lock:
                if self.returncode is None:
                    try:
                        done, status = os.waitpid(self.pid, os.WNOHANG)
                    except ChildProcessError:  # reaped by someone else: its code is lost
                        done, status = self.pid, 0
                    if done:
                        self.returncode = os.waitstatus_to_exitcode(status)
                if self.returncode is not None:
                    return self.returncode
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"litdata-io's obstore helper (pid {self.pid})", timeout or 0.0)
            time.sleep(delay)
            delay = min(2 * delay, 0.05)


@dataclass(eq=False)
class _Connection:
    proc: _Child
    sock: socket.socket
    writer: asyncio.StreamWriter
    environ: tuple[tuple[str, str], ...]
    pending: dict[int, tuple[asyncio.Future[tuple[bool, Any]], str]] = field(
        default_factory=dict[int, tuple[asyncio.Future[tuple[bool, Any]], str]]
    )
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reader_task: asyncio.Task[None] | None = None
    retired: bool = False
    closed: bool = False

    async def send(self, message: _Call | _Cancel) -> None:
        payload = _pickled(message)
        async with self.send_lock:
            self.writer.writelines(_frame(payload))
            await self.writer.drain()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()

    def release(self) -> None:
        """Close a retired connection once its last call is answered (the helper then exits)."""
        if self.retired and not self.pending:
            self.close()


_ids = itertools.count(1)
_current: _Connection | None = None
_closing: set[_Connection] = set()  # retired or broken connections whose helper is not reaped yet
_starting: asyncio.Lock | None = None
_inherited: list[_Connection] = []  # a forked child's copies, kept so their finalizers never run here


@_process.on_fork_in_child
def _drop_parent_connection() -> None:
    global _current, _starting
    if _current is not None:
        # The helper must see end-of-file when its parent goes, not when the last forked worker
        # does. The objects are kept: their finalizers would touch the parent's (dead) loop.
        with contextlib.suppress(OSError):
            os.close(_current.sock.detach())
        _inherited.append(_current)
    _current, _starting = None, None


async def _read_replies(conn: _Connection, reader: asyncio.StreamReader) -> None:
    try:
        while True:
            reply = await _read_frame(reader)
            if not isinstance(reply, _Reply):
                break  # not the helper speaking: treat it as gone
            entry = conn.pending.pop(reply.call_id, None)
            if entry is not None and not entry[0].done():
                entry[0].set_result((reply.ok, reply.value))
            conn.release()
    except (asyncio.IncompleteReadError, ConnectionError, OSError, pickle.UnpicklingError):
        pass
    conn.close()
    _closing.add(conn)
    try:
        code = await asyncio.wait_for(asyncio.to_thread(conn.proc.wait), timeout=10)
    except asyncio.TimeoutError:
        code = None
    else:
        _closing.discard(conn)
    died = "did not exit" if code is None else f"exited with code {code}"
    for future, url in conn.pending.values():
        if not future.done():
            future.set_exception(
                StorageError(
                    f"{url}: litdata-io's obstore helper process (pid {conn.proc.pid}) {died} during the call; "
                    "the next call starts a new helper (see 'Which process talks to the bucket' in docs/storage.md)",
                    url=url,
                )
            )
    conn.pending.clear()


def _fork_helper(fd: int) -> _Child:
    """Fork the helper, which serves the socket ``fd``.

    Serving in the fork itself is safe only on Linux (macOS's frameworks are not fork-safe) where
    obstore was never imported in this memory (a forked copy of its runtime hangs); anywhere else
    the child execs ``python -m litdata_io._processes._helper FD``. It never imports the user's script.
    """
    fresh = sys.platform != "linux" or "obstore" in sys.modules
    with warnings.catch_warnings():
        # Python 3.12+ warns about forking with threads: the child runs none of their code and
        # swaps the stdio objects a thread may have held for fresh ones.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        _become_helper(fd, fresh)
    return _Child(pid)


async def _start() -> _Connection:
    ours, theirs = socket.socketpair()
    try:
        child = _fork_helper(theirs.fileno())
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    reader, writer = await asyncio.open_unix_connection(sock=ours)
    conn = _Connection(child, ours, writer, _environment())
    conn.reader_task = asyncio.create_task(_read_replies(conn, reader))
    return conn


# A change of a variable a store client may read (a notebook sets AWS_PROFILE) starts a new helper.
# They are too many to list (credentials, endpoints, proxies, HOME for ~/.aws, PATH for a
# credential_process), so a name counts when it holds one of these words; the rest (RANK,
# LOCAL_RANK, CUDA_VISIBLE_DEVICES) can change as often as they like.
_READ_BY_CLIENTS = (
    "AWS", "BOTO", "S3_", "R2_", "AZURE", "AZURITE", "MSI_", "IDENTITY_", "IMDS", "GOOGLE", "GCS", "GCE_",
    "GCP", "CLOUDSDK", "STORAGE_EMULATOR", "OBJECT_STORE", "PROXY", "SSL_", "CERT", "CA_BUNDLE", "HOME",
    "PATH", "LITDATA",
)  # fmt: skip


def _environment() -> tuple[tuple[str, str], ...]:
    """The variables of this process's environment that a store client may read, sorted."""
    read = [(name, value) for name, value in os.environ.items() if any(w in name.upper() for w in _READ_BY_CLIENTS)]
    return tuple(sorted(read))


async def _connection() -> _Connection:
    global _current, _starting
    if _starting is None:
        _starting = asyncio.Lock()
    async with _starting:  # uncontended, it never suspends
        conn = _current
        if conn is not None and not conn.closed and conn.environ == _environment():
            return conn
        if conn is not None:
            conn.retired = True  # the environment changed: a new helper sees it; this one finishes first
            conn.release()
        _current = conn = await _start()
        return conn


async def _call(storage: bytes, request: Request[_R], url: str) -> _R:
    conn = await _connection()
    call_id = next(_ids)
    future: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
    conn.pending[call_id] = (future, url)
    try:
        await conn.send(_Call(call_id, storage, request))
        ok, value = await future
    except asyncio.CancelledError:
        conn.pending.pop(call_id, None)
        if not conn.closed:
            with contextlib.suppress(Exception):
                await asyncio.shield(conn.send(_Cancel(call_id)))
        conn.release()
        raise
    except (ConnectionError, OSError) as exc:
        conn.pending.pop(call_id, None)
        raise StorageError(f"{url}: could not reach litdata-io's obstore helper process: {exc}", url=url) from None
    if not ok:
        raise value
    return value


async def call_in_helper(storage: bytes, request: Request[_R], url: str) -> _R:
    """Run ``request`` against the storage pickled as ``storage`` in this process's helper; its result.

    Raises what the method raised there, or a StorageError naming ``url`` if the helper died meanwhile.
    """
    loop = io_loop()
    coro = _call(storage, request, url)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def _stop_at_exit() -> None:
    for conn in [*_closing.copy(), *([_current] if _current is not None else [])]:  # copy(): atomic
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)  # end-of-file for the helper, which then exits
        try:
            conn.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(conn.proc.pid, _SIGKILL)
            conn.proc.wait()


atexit.register(_stop_at_exit)


if __name__ == "__main__":
    # Run as a script, this file is `__main__`; the messages' classes are litdata_io._processes._helper's.
    from litdata_io._processes._helper import main as _main

    _main(sys.argv)
