"""Start test scripts as forks of a process that imported torch once, instead of fresh interpreters.

Many root tests run a script in a process of its own: a DDP rank (``tests/scripts/ddp_rank.py``), a
credential source's driver (``tests/scripts/credential_source.py``), a docs example whose import lines load torch
(``tests/test_doc_examples_as_written.py``). A fresh interpreter spends 2.5-3.5 CPU-seconds
importing torch before the script does anything; on 2 cores that import, not the script, was most
of those tests' time. :func:`start_python` hands the script to a zygote instead: this file run as
``python tests/support/zygote.py``, a process of this venv that imported numpy and torch and then forks one
child per request. The child is what ``python script.py args`` (or ``python -m module args``) would
be: its environment, working folder, ``sys.argv``, ``sys.path`` (the script's folder or the working
folder first, then the request's ``PYTHONPATH``), stdout/stderr (files) and a fresh ``__main__``
are set before the script runs; at the end it joins non-daemon threads and runs ``atexit`` (which
joins multiprocessing children), as interpreter exit does. Several children run at once (the ranks
of one job); each can start a session of its own (``start_new_session``).

What a child does not get fresh: the modules the zygote imported (numpy, torch; imported under the
zygote's environment, which is the test process's without ``PYTHONPATH``) and what python itself
reads at start (the hash seed, ``PYTHON*`` variables: a child applies those of ``EMULATED`` itself,
and a request whose other ``PYTHON*`` variables differ from the zygote's gets a fresh interpreter).
Of what torch's import reads, ``OMP_NUM_THREADS`` is applied by the child too (a thread count:
torch's ``set_num_threads``, before any thread pool exists); a request without it when the zygote
has it, or with another form of it, gets a fresh interpreter.
What a fresh interpreter has of its own and siblings would share is made again in each child
(numpy's global generator, multiprocessing's authkey, tempfile's folder). Nothing of this
repository is imported before the fork, so litdata reads the request's environment when the script
imports it, and obstore has never run in the zygote (its runtime hangs in a child forked after it
ran). A script that must run in a network namespace, or whose interpreter start is what it tests,
still gets a real ``subprocess``. ``LITDATA_TEST_FORK=0`` starts a fresh interpreter for every
script instead (the same API; to tell a zygote problem from a test's).

The zygote is single-threaded (a fork from a threaded process can inherit a held lock): one
``poll`` loop over its stdin (one JSON request a line) and one pidfd per child. It answers each
request with ``{"id", "pid"}`` once forked and ``{"id", "code"}`` once the child ended (its exit
code, minus the signal that killed it). At end of input it kills what is left and exits.

A script whose first lines import a heavy library beside torch (torch-geometric: ~5-8 CPU-seconds)
can ask for a zygote that imported it too (``preload``): ``python tests/support/zygote.py torch_geometric``,
one more zygote per set of modules, started on first use (or ahead, :func:`start_zygote`). Its
child is what a fresh interpreter is once lines importing those modules ran; the caller asks for
it only then (``tests/test_doc_examples_as_written.py`` reads the script's import lines).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["PythonProcess", "run_python", "start_python", "start_zygote"]

PRELOAD = ("numpy", "torch")
# Read by torch's import (its OpenMP and intra-op pools), applied by a child with torch.set_num_threads.
THREADS = "OMP_NUM_THREADS"
# The PYTHON* variables python reads at start that a child applies itself; any other one set
# differently from the zygote's environment gets the script a fresh interpreter.
EMULATED = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER")


# --- the zygote (runs as ``python tests/support/zygote.py``; imports nothing from this repository) ---------


def _exit_code(err: SystemExit) -> int:
    if err.code is None:
        return 0
    if isinstance(err.code, int):
        return err.code
    print(err.code, file=sys.stderr)
    return 1


def _fresh_process_state() -> None:
    """What a fresh interpreter has of its own and a fork would share with its siblings."""
    import multiprocessing
    import tempfile

    import numpy

    numpy.random.seed()  # numpy's global generator, seeded at import (Python's random reseeds at fork itself)
    multiprocessing.current_process().authkey = os.urandom(32)  # made once, at multiprocessing's import
    tempfile.tempdir = None  # found again from this process's TMPDIR


def _startup_settings() -> None:
    """The ``PYTHON*`` variables python reads at start that a fork can still apply (see ``EMULATED``)."""
    import faulthandler
    import io

    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for fd, name in ((1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        stream = io.TextIOWrapper(
            open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False),  # noqa: SIM115 (the process's own, for life)
            encoding=old.encoding,
            errors=old.errors,
            line_buffering=fd == 2,  # python's stderr is line-buffered even to a file
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    if os.environ.get("PYTHONFAULTHANDLER"):
        faulthandler.enable()
    else:
        faulthandler.disable()
    threads = os.environ.get(THREADS, "")
    if threads.isdigit() and int(threads) > 0:
        import torch

        torch.set_num_threads(int(threads))


def _child(request: dict[str, Any], base_path: list[str]) -> None:
    """Become ``python <argv>`` with the request's environment; never returns."""
    import runpy
    import traceback

    code = 1
    try:
        if request.get("session"):
            os.setsid()
        target = os.open(str(request["stdout"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, 1)
        os.close(target)
        if request["stderr"] == request["stdout"]:  # one file for both, as stderr=subprocess.STDOUT
            os.dup2(1, 2)
        else:
            target = os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, 2)
            os.close(target)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])
        _fresh_process_state()
        _startup_settings()
        argv: list[str] = list(request["argv"])
        extra = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
        module = argv[1] if argv[0] == "-m" else None
        if module is not None:
            sys.path[:] = [os.getcwd(), *extra, *base_path]
            sys.argv = [module, *argv[2:]]  # runpy puts the module's file in argv[0]
        else:
            sys.path[:] = [os.path.dirname(os.path.realpath(argv[0])), *extra, *base_path]
            sys.argv = argv
        try:
            if module is not None:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as err:
            code = _exit_code(err)
        except BaseException:
            traceback.print_exc()
            code = 1
        # What interpreter exit does: wait for non-daemon threads, then the atexit functions (among
        # them multiprocessing's, which joins the script's child processes).
        getattr(threading, "_shutdown")()  # noqa: B009 (private: there is no public way to do this)
        getattr(atexit, "_run_exitfuncs")()  # noqa: B009
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream has nothing left to lose
                stream.flush()
        os._exit(code)


def _serve(extra: Sequence[str]) -> None:
    for name in (*PRELOAD, *extra):
        __import__(name)
    base_path = list(sys.path[1:])  # sys.path[0] is this file's folder; each child sets its own
    answers = os.dup(1)
    os.dup2(2, 1)  # what the zygote itself might print never mixes with the answers
    poller = select.poll()
    poller.register(0, select.POLLIN)
    running: dict[int, tuple[int, int]] = {}  # pidfd -> (request id, pid)
    pending = b""
    open_input = True

    def answer(message: dict[str, int]) -> None:
        os.write(answers, (json.dumps(message) + "\n").encode())

    while open_input or running:
        for fd, _ in poller.poll():
            if fd in running:
                request_id, pid = running.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                answer({"id": request_id, "code": os.waitstatus_to_exitcode(status)})
                continue
            data = os.read(0, 1 << 16)
            if not data:  # the test process is gone: nothing is waiting for what is left
                open_input = False
                poller.unregister(0)
                for _, pid in running.values():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                continue
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    os.close(answers)
                    for pidfd in running:
                        os.close(pidfd)
                    _child(request, base_path)
                pidfd = os.pidfd_open(pid)
                running[pidfd] = (int(request["id"]), pid)
                poller.register(pidfd, select.POLLIN)
                answer({"id": int(request["id"]), "pid": pid})


# --- the test side ----------------------------------------------------------------------------


def _zygote_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _startup_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables python reads once, at start (``PYTHONHASHSEED``, ...), that a fork keeps the zygote's."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k not in EMULATED}


def _forkable(env: Mapping[str, str]) -> bool:
    """Whether a child of the zygote can be what a fresh interpreter with ``env`` would be."""
    zygote = _zygote_env()
    if _startup_variables(env) != _startup_variables(zygote):
        return False
    # torch took the zygote's thread count at import; a child can set another count, not unset it
    wanted = env.get(THREADS)
    return wanted == zygote.get(THREADS) or (wanted is not None and wanted.isdigit() and int(wanted) > 0)


class _Zygote:
    """The zygote process (``extra``: what it imports beside ``PRELOAD``) and the thread that reads its answers."""

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_zygote_env(),
            cwd=tempfile.gettempdir(),
        )
        self.changed = threading.Condition()
        self.answers: dict[int, dict[str, int]] = {}
        self.closed = False  # its answers ended: it is gone
        self.next_id = 0
        self.reader = threading.Thread(target=self._read, name="zygote-answers", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            with self.changed:
                self.answers.setdefault(message["id"], {}).update(message)
                self.changed.notify_all()
        with self.changed:  # the zygote is gone: wake every waiter
            self.closed = True
            self.changed.notify_all()

    def alive(self) -> bool:
        return not self.closed and self.proc.poll() is None

    def request(self, request: dict[str, Any]) -> tuple[int, int]:
        """Send ``request``; its id and the child's pid."""
        assert self.proc.stdin is not None
        with self.changed:
            request_id = self.next_id
            self.next_id += 1
            self.proc.stdin.write((json.dumps({**request, "id": request_id}) + "\n").encode())
            self.proc.stdin.flush()
            while "pid" not in self.answers.get(request_id, {}):
                if not self.alive():
                    raise RuntimeError(
                        "the test zygote (tests/support/zygote.py) died; LITDATA_TEST_FORK=0 runs without it"
                    )
                self.changed.wait(timeout=1)
            return request_id, self.answers[request_id]["pid"]

    def code(self, request_id: int, timeout: float | None) -> int | None:
        """The child's exit code, or None if it has not ended within ``timeout`` seconds."""
        with self.changed:
            ended = self.changed.wait_for(
                lambda: "code" in self.answers.get(request_id, {}) or not self.alive(), timeout=timeout
            )
            if not ended:
                return None
            if "code" not in self.answers.get(request_id, {}):
                raise RuntimeError("the test zygote (tests/support/zygote.py) died while a script ran in it")
            # kept, not popped: another thread waiting for the same child must find it too
            return self.answers[request_id]["code"]

    def stop(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # the zygote kills what is left and exits
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_zygotes: dict[tuple[str, ...], _Zygote] = {}  # by the modules each imported beside PRELOAD
_zygote_lock = threading.Lock()


def _stop_zygotes() -> None:
    for zygote in list(_zygotes.values()):
        zygote.stop()


def _the_zygote(extra: tuple[str, ...] = ()) -> _Zygote:
    with _zygote_lock:
        zygote = _zygotes.get(extra)
        if zygote is None or not zygote.alive():
            if not _zygotes:
                atexit.register(_stop_zygotes)
            zygote = _zygotes[extra] = _Zygote(extra)
        return zygote


def start_zygote(preload: Sequence[str] = ()) -> None:
    """Start the zygote that imports ``preload`` beside numpy and torch, if not running: it imports them while
    the caller goes on (what :func:`start_python` with that ``preload`` would wait for). Nothing with
    ``LITDATA_TEST_FORK=0``."""
    if os.environ.get("LITDATA_TEST_FORK", "1") != "0":
        _the_zygote(tuple(preload))


class PythonProcess:
    """A script running as ``python *args``: forked from the zygote, or a fresh interpreter.

    The part of :class:`subprocess.Popen` the tests use: ``pid``, ``returncode``, :meth:`poll`,
    :meth:`wait`, :meth:`kill` and :meth:`communicate` (stdout and stderr as text; they go to files
    in a folder of the process's own, removed by :meth:`communicate`; or both to ``output``, as
    ``stdout=file, stderr=subprocess.STDOUT`` would, and :meth:`communicate` returns its text as stdout).
    ``preload``: modules the script's first lines import beside torch, for a zygote that imported them
    too (see the module docstring).
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str],
        start_new_session: bool = False,
        output: str | os.PathLike[str] | None = None,
        preload: Sequence[str] = (),
    ) -> None:
        if not args or (args[0].startswith("-") and args[0] != "-m"):
            raise ValueError(f"start_python runs a script path or `-m module`, not {list(args)!r}")
        self._logs: Path | None = None
        if output is None:
            self._logs = Path(tempfile.mkdtemp(prefix="zygote-logs-"))
            self._out, self._err = self._logs / "stdout", self._logs / "stderr"
        else:
            self._out = self._err = Path(output)
        self.args = list(args)
        self.returncode: int | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._zygote: _Zygote | None = None
        if os.environ.get("LITDATA_TEST_FORK", "1") == "0" or not _forkable(env):
            with self._out.open("wb") as out, contextlib.ExitStack() as stack:
                err = subprocess.STDOUT if output is not None else stack.enter_context(self._err.open("wb"))
                self._popen = subprocess.Popen(
                    [sys.executable, *self.args],
                    env=dict(env),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=start_new_session,
                )
            self.pid = self._popen.pid
            return
        request = {
            "argv": self.args,
            "env": dict(env),
            "cwd": str(cwd),
            "stdout": str(self._out),
            "stderr": str(self._err),
            "session": start_new_session,
        }
        self._zygote = _the_zygote(tuple(preload))
        self._id, self.pid = self._zygote.request(request)

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (minus the signal that killed it); :class:`subprocess.TimeoutExpired` after ``timeout``."""
        if self.returncode is not None:
            return self.returncode
        if self._popen is not None:
            self.returncode = self._popen.wait(timeout)
            return self.returncode
        assert self._zygote is not None
        code = self._zygote.code(self._id, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.returncode = code
        return code

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the end; its stdout and stderr as text (:class:`subprocess.TimeoutExpired` keeps them)."""
        self.wait(timeout)
        texts = tuple(path.read_text(errors="replace") if path.exists() else "" for path in (self._out, self._err))
        if self._logs is not None:
            shutil.rmtree(self._logs, ignore_errors=True)
        return (texts[0], "") if self._out == self._err else (texts[0], texts[1])


def start_python(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str],
    start_new_session: bool = False,
    output: str | os.PathLike[str] | None = None,
    preload: Sequence[str] = (),
) -> PythonProcess:
    """Start ``python *args`` (a script path or ``-m module``, then its arguments); see the module docstring.

    ``output``: one file for both stdout and stderr; ``preload``: see :class:`PythonProcess`.
    """
    return PythonProcess(args, env=env, cwd=cwd, start_new_session=start_new_session, output=output, preload=preload)


def run_python(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str],
    timeout: float,
    preload: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` to its end, as ``subprocess.run(..., capture_output=True, text=True)`` would."""
    proc = start_python(args, env=env, cwd=cwd, start_new_session=True, preload=preload)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its workers too
        stdout, stderr = proc.communicate()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess([sys.executable, *args], proc.returncode, stdout, stderr)


if __name__ == "__main__":
    _serve(sys.argv[1:])
