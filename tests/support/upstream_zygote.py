"""A process in the upstream side venv that has imported torch once and forks a child per script.

``tests/support/upstream_venv.py`` starts it with the side venv's python and writes one JSON request a line
on its stdin (``script``, ``argv``, ``env``, ``cwd``, ``stdout``, ``stderr``); it answers each with a
JSON line ``{"code": <exit code>}`` once the child has ended. A child is what ``python -c script``
would be, but without the 2-3 s torch import: its environment, working folder, ``sys.argv`` and a
fresh ``__main__`` are set before the script runs, and litdata (which reads its environment variables
when imported) is imported by the script itself, in the child. At the end the child does what an
interpreter does at exit (joins non-daemon threads, runs atexit, which joins multiprocessing
children) and exits with the script's code.

Runs only in the side venv: it imports nothing from this repository.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import json
import os
import sys
import threading
import traceback
import types
from typing import Any

PRELOAD = ("numpy", "torch")


def _exit_code(err: SystemExit) -> int:
    if err.code is None:
        return 0
    if isinstance(err.code, int):
        return err.code
    print(err.code, file=sys.stderr)
    return 1


def _child(request: dict[str, Any], protocol: int) -> None:
    code = 1
    try:
        os.close(protocol)  # the script's own children must not hold the server's answer pipe
        for fd, name in ((1, "stdout"), (2, "stderr")):
            target = os.open(str(request[name]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own stdin, never closed)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["-c", *request["argv"]]
        sys.path[0] = ""  # as under `python -c`: the working folder
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        try:
            exec(compile(str(request["script"]), "<string>", "exec"), main.__dict__)
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
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream has nothing left to lose
                stream.flush()
        os._exit(code)


def main() -> None:
    for name in PRELOAD:
        __import__(name)
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the server itself might print never mixes with the answers
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, protocol.fileno())
        _, status = os.waitpid(pid, 0)
        protocol.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
