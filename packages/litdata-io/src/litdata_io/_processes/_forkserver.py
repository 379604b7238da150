"""A forkserver that loads the main script once, so the workers forked from it start in milliseconds.

Preloading ``"__main__"`` in the forkserver is meant to import the user's script there once, but
CPython 3.11 to 3.13 never pass the script's path to the server (python/cpython#126631), so every
forked worker runs the whole script again. :func:`start_forkserver` starts the server with the path
in ``LITDATA_FORKSERVER_MAIN`` and this module in its preload list; imported in the server, the
module loads the script as ``__mp_main__``, as spawn would.

The server also exits with the process that started it, even one killed with SIGKILL
(:func:`_exit_with_parent`): CPython's server hands its "alive" pipe to every worker it forks, and
torch's workers exit only when the server does, so they would outlive a killed trainer, still
pinning the chunks they were reading.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["forkserver_running", "start_forkserver"]

_ENV = "LITDATA_FORKSERVER_MAIN"
_PARENT_ENV = "LITDATA_FORKSERVER_PARENT"


def start_forkserver(modules: Sequence[str] = ()) -> None:
    """Start this process's forkserver, unless it runs already, preloading the main script and ``modules``.

    A preload list the user set is kept. When the server runs already, nothing changes.

    Args:
        modules: more modules for the server to import before it forks workers.
    """
    from multiprocessing import forkserver, get_context, spawn

    server = getattr(forkserver, "_forkserver", None)
    current = list(getattr(server, "_preload_modules", None) or ["__main__"])
    wanted = [*current, *(m for m in (__name__, *modules) if m not in current)]
    if wanted != current:
        get_context("forkserver").set_forkserver_preload(wanted)
    path = spawn.get_preparation_data("ignore").get("init_main_from_path") if "__main__" in wanted else None
    if path:
        os.environ[_ENV] = path  # the server inherits the environment it is started with
    os.environ[_PARENT_ENV] = str(os.getpid())
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(_ENV, None)
        os.environ.pop(_PARENT_ENV, None)


def forkserver_running() -> bool:
    """Whether this process started its forkserver already (workers forked from it start warm)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    return getattr(server, "_forkserver_pid", None) is not None


def _load_main_in_server() -> None:
    path = os.environ.pop(_ENV, None)
    main = sys.modules.get("__main__")
    # Only the server (started as `python -c ...`) loads the script; any other process that picked
    # the variable up while it was set just drops it.
    if not path or sys.argv[:1] != ["-c"] or getattr(main, "__file__", None) == path:
        return
    from multiprocessing import process, spawn

    me = process.current_process()
    # What spawn sets while it imports the script: a script without the `__main__` guard that starts
    # processes fails with Python's own "bootstrapping phase" error instead of forking from the server.
    me._inheriting = True  # pyright: ignore[reportAttributeAccessIssue]
    try:
        spawn.import_main_path(path)
    except BaseException:  # the workers run the script themselves and report what is wrong with it
        pass
    finally:
        del me._inheriting  # pyright: ignore[reportAttributeAccessIssue]


def _exit_with_parent() -> None:
    """In the server (Linux): exit as soon as the process that started it is gone.

    The kernel's parent-death signal (``PR_SET_PDEATHSIG``) tells it (and then its workers); as the
    signal also comes when only the starting thread ends, the server checks its parent is gone.
    """
    raw = os.environ.pop(_PARENT_ENV, "")
    if not raw.isdigit() or sys.argv[:1] != ["-c"] or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent, server = int(raw), os.getpid()

    def on_parent_death(signum: int, frame: object) -> None:
        if os.getpid() == server and os.getppid() != parent:
            os._exit(0)

    notice = signal.SIGRTMIN + 3
    signal.signal(notice, on_parent_death)
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    if prctl(1, int(notice), 0, 0, 0) == 0 and os.getppid() != parent:  # 1: PR_SET_PDEATHSIG
        os._exit(0)  # the parent died before the server asked to be told


if os.environ.get(_PARENT_ENV):  # imported by the forkserver process, as a preloaded module
    _exit_with_parent()
if os.environ.get(_ENV):
    _load_main_in_server()
