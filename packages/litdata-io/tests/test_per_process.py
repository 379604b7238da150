"""PerProcess: the one way a value is built once per process (forked children and pickled copies build their own)."""

from __future__ import annotations

import multiprocessing
import os
import pickle

from litdata_io.internal import PerProcess


def _built_here(holder: PerProcess[int], parent_value: int, results: multiprocessing.SimpleQueue[object]) -> None:
    # In the forked child: the parent's value is not seen, and get() builds the child's own.
    results.put((holder.peek(), holder.get(os.getpid), holder.get(lambda: -1), parent_value))


def test_built_once_per_process_and_again_in_a_forked_child() -> None:
    builds: list[int] = []

    def build() -> int:
        builds.append(os.getpid())
        return os.getpid()

    holder: PerProcess[int] = PerProcess()
    assert holder.peek() is None
    assert holder.get(build) == os.getpid() and holder.get(build) == os.getpid()
    assert builds == [os.getpid()]  # built once in this process
    assert holder.peek() == os.getpid()

    context = multiprocessing.get_context("fork")
    results: multiprocessing.SimpleQueue[object] = context.SimpleQueue()
    child = context.Process(target=_built_here, args=(holder, holder.get(build), results))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    seen_first, built, kept, parent_value = results.get()  # type: ignore[misc]
    assert seen_first is None and built == child.pid and kept == child.pid and parent_value == os.getpid()
    assert holder.get(build) == os.getpid()  # the parent's is untouched

    holder.clear()
    assert holder.peek() is None and holder.get(build) == os.getpid() and len(builds) == 2


def test_a_pickled_copy_carries_no_value() -> None:
    holder: PerProcess[list[int]] = PerProcess()
    holder.get(lambda: [1, 2, 3])
    copy = pickle.loads(pickle.dumps(holder))
    assert copy.peek() is None and copy.get(lambda: [4]) == [4]
    assert holder.peek() == [1, 2, 3]


def _tracked(obj: object) -> bool:
    """Whether the garbage collector walks ``obj`` (frozen objects are not listed)."""
    import gc

    return any(o is obj for o in gc.get_objects())


def _freeze_twice(results: multiprocessing.SimpleQueue[object]) -> None:
    # In a forked child (never the test process: a freeze there would outlive the test).
    from litdata_io.internal import freeze_inherited

    before = ["made before the first call"]
    freeze_inherited()
    after = ["made after it"]
    freeze_inherited()  # once per process: `after` stays the collector's
    grandchild: multiprocessing.SimpleQueue[object] = multiprocessing.get_context("fork").SimpleQueue()

    def in_grandchild() -> None:
        freeze_inherited()  # a forked child freezes again, what it inherited included
        grandchild.put(_tracked(after))

    process = multiprocessing.get_context("fork").Process(target=in_grandchild)
    process.start()
    process.join(30)
    results.put((_tracked(before), _tracked(after), grandchild.get(), process.exitcode))


def test_freeze_inherited_freezes_once_per_process() -> None:
    context = multiprocessing.get_context("fork")
    results: multiprocessing.SimpleQueue[object] = context.SimpleQueue()
    child = context.Process(target=_freeze_twice, args=(results,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert results.get() == (False, True, False, 0)  # before: frozen; after: walked; grandchild: frozen again
