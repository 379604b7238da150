"""litdata_io's user API behaves as documented (the names themselves are pinned by tests/test_layering.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import litdata_io


def test_storage_has_sync_and_async_twins() -> None:
    for name in ("head", "exists", "list", "get", "get_range", "put", "delete", "download", "upload", "copy"):
        assert callable(getattr(litdata_io.Storage, name))
        assert callable(getattr(litdata_io.Storage, f"a{name}"))


def test_names_load_their_module_on_first_use() -> None:
    import subprocess
    import sys

    code = (
        "import sys, litdata_io, litdata_io.internal\n"
        "assert 'litdata_io._cache._chunk_cache' not in sys.modules and 'asyncio' not in sys.modules\n"
        "litdata_io.resolve_dir; litdata_io.trace_span; litdata_io.internal.fork_generation\n"
        "assert 'asyncio' not in sys.modules\n"
        "litdata_io.ChunkCache\n"
        "assert 'litdata_io._cache._chunk_cache' in sys.modules\n"
        "from litdata_io import *\n"
        "print(sorted(set(dir(litdata_io)) & set(litdata_io.__all__)) == sorted(litdata_io.__all__))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_an_unknown_name_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        litdata_io.nope  # noqa: B018  # pyright: ignore[reportAttributeAccessIssue]


_FORKSERVER_SCRIPT = """
import multiprocessing as mp
import os

LOADED_BY = os.getpid()


def probe(queue):
    queue.put((LOADED_BY == os.getppid(), os.environ.get("LITDATA_FORKSERVER_MAIN")))


if __name__ == "__main__":
    from litdata_io import start_forkserver

    start_forkserver()
    assert "LITDATA_FORKSERVER_MAIN" not in os.environ
    context = mp.get_context("forkserver")
    queue = context.Queue()
    process = context.Process(target=probe, args=(queue,))
    process.start()
    print(queue.get())
    process.join()
"""


def test_start_forkserver_loads_the_script_once_in_the_server(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "job.py"
    script.write_text(_FORKSERVER_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], check=True, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "(True, None)"  # loaded by the server; the path did not leak into workers


_KILLED_SCRIPT = """
import multiprocessing as mp
import os
import signal
import sys
import time


def worker(ready):
    # What torch's DataLoader worker does: run until its parent (here the forkserver) is gone.
    parent = os.getppid()
    ready.put(os.getpid())
    while os.getppid() == parent:
        time.sleep(0.05)


if __name__ == "__main__":
    from litdata_io import start_forkserver

    start_forkserver()
    context = mp.get_context("forkserver")
    ready = context.Queue()
    context.Process(target=worker, args=(ready,)).start()
    print(ready.get(timeout=60), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # a preemption: no cleanup at all
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_forkserver_and_its_workers_exit_when_their_starter_is_killed(tmp_path: Path) -> None:
    import subprocess
    import time

    script = tmp_path / "job.py"
    script.write_text(_KILLED_SCRIPT)
    log = tmp_path / "job.log"
    with log.open("wb") as sink:  # not a pipe: what outlives the script would hold it open
        proc = subprocess.Popen([sys.executable, str(script)], stdout=sink, stderr=sink, start_new_session=True)
    try:
        proc.wait(timeout=120)
        assert proc.returncode == -9, log.read_text()
        deadline = time.monotonic() + 15
        while (left := _in_session(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        # Before: CPython's server waits for its "alive" pipe, which it handed to the worker, and the
        # worker waits for the server: both ran forever.
        assert not left, f"the forkserver or its worker outlived the process that started them: {left}"
    finally:
        for pid in _in_session(proc.pid):
            os.kill(pid, 9)


def _in_session(session: int) -> list[int]:
    """The live processes of a session (the ones a killed process left behind)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split() if stat else []
        if fields and fields[0] != "Z" and int(fields[3]) == session:
            found.append(int(entry.name))
    return found
