"""The sync twins: from plain code, from inside a running loop, and in a forked child."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from litdata_io import get_storage
from litdata_io._processes._loop import run_sync


def test_sync_twins_work_inside_a_running_loop(tmp_path: Path) -> None:
    storage = get_storage(tmp_path)
    storage.put("k", b"v")

    async def main() -> bytes:
        return storage.get("k")

    assert asyncio.run(main()) == b"v"


def test_calling_a_sync_twin_on_the_loop_thread_is_refused() -> None:
    async def inner() -> int:
        return 1

    async def outer() -> None:
        run_sync(inner())

    with pytest.raises(RuntimeError, match="await its async twin"):
        run_sync(outer())


def test_no_loop_thread_until_first_use() -> None:
    code = (
        "import threading, litdata_io; "
        "assert not [t for t in threading.enumerate() if t.name == 'litdata-io-loop'], 'thread at import'"
    )
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _child(path: str, queue: Any) -> None:
    storage = get_storage(path)
    data = run_sync(storage.aget("k"))  # the async API: through this process's loop thread
    names = [t.name for t in threading.enumerate()]
    queue.put((data, names.count("litdata-io-loop"), os.getpid()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_a_forked_child_gets_its_own_loop(tmp_path: Path) -> None:
    storage = get_storage(tmp_path)
    run_sync(storage.aput("k", b"from parent"))  # the parent's loop thread runs now
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(str(tmp_path), queue))
    child.start()
    data, loops, pid = queue.get(timeout=60)
    child.join(10)
    assert (data, loops) == (b"from parent", 1) and pid != os.getpid()
