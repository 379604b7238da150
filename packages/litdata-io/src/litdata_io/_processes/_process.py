"""Per-process state: a fork hook, a cheap process identity, where obstore runs, a worker's freeze.

Everything kept per process (clients, loop threads, the cache's pins, the tracer's file, stream
sources) starts afresh in a forked child through this module: :func:`on_fork_in_child` registers a
reset, :func:`pid` is the process id without a system call, :func:`fork_generation` changes in
every forked child, and :class:`PerProcess` builds a value once per process.

Where obstore runs. obstore's Rust (tokio) runtime does not survive ``fork()``: a child forked
after its parent made an obstore request hangs on its first one (developmentseed/obstore#441). So
:func:`obstore_placement` says where this process's obstore calls run, from what the process was
declared to be:

- ``"here"`` in a worker, which does not fork (an optimize or map worker calls
  :func:`declare_worker`; torch declares a DataLoader worker, ``get_worker_info()``);
- ``"helper"`` (:mod:`litdata_io._processes._helper`) in every other process: a root (a script, a
  notebook, a DDP rank) keeps the runtime out of its memory so the workers it forks can run obstore;
- ``"helper"`` always where obstore was imported when this process was forked: it would hang here.

``LITDATA_OBSTORE_PROCESS=here|helper`` overrides the first two rules (``here`` skips the helper
in a root process that never forks); nothing overrides the third.

A worker's freeze. :func:`freeze_inherited` moves what a worker inherited out of the garbage
collector's reach, once per process.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

from litdata_format.internal import read_choice

__all__ = [
    "PerProcess",
    "declare_worker",
    "fork_generation",
    "freeze_inherited",
    "obstore_placement",
    "on_fork_in_child",
    "pid",
    "serve_obstore_here",
]

T = TypeVar("T")

Placement = Literal["here", "helper"]
_ENV = "LITDATA_OBSTORE_PROCESS"

_pid = os.getpid()
_generation = 0
_callbacks: list[Callable[[], None]] = []
_placement: Placement | None = None
_forced: Placement | None = None
_worker = False  # declared a worker (declare_worker)
# Whether obstore was imported when this process was forked (its runtime may be in this memory).
_inherited_obstore = False


def _after_fork_in_child() -> None:
    global _pid, _generation, _placement, _inherited_obstore, _worker
    _pid = os.getpid()
    _generation += 1
    _placement, _worker = None, False  # decided again: the child is a different kind of process than its parent
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


class PerProcess(Generic[T]):
    """A value built on first use in each process: a forked child builds its own, a pickled copy carries none."""

    __slots__ = ("_generation", "_value")

    def __init__(self) -> None:
        self._value: T | None = None
        self._generation = -1

    def get(self, build: Callable[[], T]) -> T:
        """The value built in this process, built now by ``build()`` if there is none yet."""
        if self._generation != _generation:
            self._value = build()
            self._generation = _generation
        return self._value  # type: ignore[return-value]  # set just above in this process

    def peek(self) -> T | None:
        """The value built in this process, or None if none was (nothing is built)."""
        return self._value if self._generation == _generation else None

    def clear(self) -> None:
        """Forget the value: the next :meth:`get` builds it again."""
        self._value, self._generation = None, -1

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.clear()


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


def declare_worker() -> None:
    """Declare this process a worker a litdata package started, which does not fork: it runs obstore itself.

    A child forked from it later is not a worker unless it is declared too.
    """
    global _worker, _placement
    _worker, _placement = True, None


def freeze_inherited() -> None:
    """Once per worker process: move every object it holds now out of the garbage collector's reach.

    What a worker inherited (torch, the user's ``fn``, a forking parent's heap) lives as long as
    the process; each full collection walked all of it and, in a forked process, copied every page
    it marked out of the memory shared with the parent (``benchmarks/worker_gc.py``). Called where a
    litdata worker starts its work, never in a root process: its objects are the user's to collect.
    """
    _frozen.get(_freeze)


def _freeze() -> bool:
    gc.freeze()
    return True


_frozen: PerProcess[bool] = PerProcess()  # built (the freeze done) once in each process


def obstore_placement() -> Placement:
    """Where this process's obstore calls run: ``"here"`` or ``"helper"`` (see the module docstring)."""
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
    wanted = read_choice(_ENV, ("auto", "here", "helper"))
    if wanted in ("here", "helper"):
        return "here" if wanted == "here" else "helper"
    data = sys.modules.get("torch.utils.data")  # a DataLoader worker, looked up without importing torch
    return "here" if _worker or (data is not None and data.get_worker_info() is not None) else "helper"
