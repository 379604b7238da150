"""litdata_io's user API behaves as documented (the names themselves are pinned by tests/test_layering.py)."""

from __future__ import annotations

from pathlib import Path

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
        "assert 'litdata_io._cache' not in sys.modules and 'asyncio' not in sys.modules\n"
        "litdata_io.resolve_dir; litdata_io.trace_span; litdata_io.internal.fork_generation\n"
        "assert 'asyncio' not in sys.modules\n"
        "litdata_io.ChunkCache\n"
        "assert 'litdata_io._cache' in sys.modules\n"
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
