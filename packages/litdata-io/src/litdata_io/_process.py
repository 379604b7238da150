"""Per-process state: one fork hook, a cheap process identity, and which process runs obstore.

Everything litdata-io (and the packages above it) keeps per process (clients, loop threads, the
cache's pins and descriptors, the tracer's file, the activity slot, stream sources) starts afresh
in a forked child. Rather than each keeping its own ``os.register_at_fork`` hook or comparing
``os.getpid()`` on every call, they use this module: :func:`on_fork_in_child` registers a reset,
:func:`pid` is the current process id without a system call, and :func:`fork_generation` is a number
that changes in every forked child (compare it to a remembered one to learn "am I still the
process that built this?").

Where obstore runs. obstore's Rust (tokio) runtime does not survive ``fork()``: once a process
made an obstore request, any child forked from it hangs on its first request. So
:func:`obstore_placement` decides once per process where obstore calls run:

- ``"here"``, in this process, when no ancestor started obstore's runtime in memory this process
  inherited (taken as: obstore was not imported when this process was forked, so a parent that used
  obstore directly counts too) and this is a multiprocessing child (DataLoader and optimize workers:
  they do the heavy lifting and do not fork);
- ``"helper"``, in a helper process (:mod:`litdata_io._helper`), otherwise: a root process (a
  script, a notebook kernel) keeps the runtime out of its memory so that the workers it forks can
  run obstore themselves, and a process forked after its parent started the runtime cannot run it.

``LITDATA_OBSTORE_PROCESS=here|helper`` overrides the first part of the rule (``here`` skips the
helper in a root process that never forks); a process that inherited a started runtime always uses
the helper, since obstore would hang there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Literal

__all__ = ["fork_generation", "obstore_placement", "on_fork_in_child", "pid", "serve_obstore_here"]

Placement = Literal["here", "helper"]
_ENV = "LITDATA_OBSTORE_PROCESS"

_pid = os.getpid()
_generation = 0
_callbacks: list[Callable[[], None]] = []
_placement: Placement | None = None
_forced: Placement | None = None
# Whether an ancestor may have started obstore's runtime in memory this process inherited. Its
# runtime starts at the first request, which needs obstore imported: "imported when forked" is
# the safe test (a false alarm only costs the helper's round trip).
_inherited_obstore = False


def _after_fork_in_child() -> None:
    global _pid, _generation, _placement, _inherited_obstore
    _pid = os.getpid()
    _generation += 1
    _placement = None  # decided again: the child is a different kind of process than its parent
    _inherited_obstore = _inherited_obstore or "obstore" in sys.modules
    for callback in list(_callbacks):
        callback()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def pid() -> int:
    """This process's id, kept current across forks (no system call)."""
    return _pid


def fork_generation() -> int:
    """A number that changes in every forked child: state built under another number is the parent's."""
    return _generation


def on_fork_in_child(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` in every child forked from now on, right after the fork (usable as a decorator).

    The callback runs before any other code of the child, with only one thread alive: it must
    only drop or reset state (never wait on a lock another thread may have held at the fork).
    """
    _callbacks.append(callback)
    return callback


def serve_obstore_here() -> None:
    """Make this process run obstore itself, whatever the rule says (the helper process does this)."""
    global _forced, _placement
    _forced = _placement = "here"


def obstore_placement() -> Placement:
    """Where this process's obstore calls run: ``"here"`` or ``"helper"`` (see the module docstring).

    Raises:
        ValueError: ``LITDATA_OBSTORE_PROCESS`` is set to something else than auto, here or helper.
    """
    global _placement
    placement = _placement
    if placement is None:
        placement = _placement = _decide()
    return placement


def _decide() -> Placement:
    if _forced is not None:
        return _forced
    if _inherited_obstore:
        return "helper"  # an ancestor's runtime is in this memory, dead: obstore would hang here
    wanted = os.environ.get(_ENV, "").strip().lower() or "auto"
    if wanted in ("here", "helper"):
        return "here" if wanted == "here" else "helper"
    if wanted != "auto":
        raise ValueError(
            f"{_ENV}={wanted!r}: use auto (the default), here (obstore in this process: only if it never "
            "forks after using it) or helper (obstore in a helper process)"
        )
    import multiprocessing

    return "here" if multiprocessing.parent_process() is not None else "helper"
