"""Bad input gives a clear error before any worker process starts."""

from __future__ import annotations

import importlib
import importlib.util
import json
import multiprocessing as mp
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from litdata_format import DatasetReader
from litdata_prep import DatasetExistsError, map, optimize

fns: Any = importlib.import_module("prep_fns")


@pytest.fixture(autouse=True)
def no_worker_left() -> Iterator[None]:
    yield
    assert fns.children_reaped()


def _run(call: Callable[[], Any], error: type[Exception], match: str, out: Path | None = None) -> None:
    with pytest.raises(error, match=match):
        call()
    if out is not None and out.exists():
        assert not [p for p in out.rglob("*") if p.name.startswith("chunk-") or p.name == "index.json"]


def test_fn_not_picklable_under_spawn(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(lambda: optimize(lambda i: i, [1, 2], out, chunk_size=2, num_workers=1), TypeError, "cannot be sent", out)

    def nested(i: int) -> int:
        return i

    _run(lambda: optimize(nested, [1, 2], out, chunk_size=2), TypeError, "top level of an importable module", out)
    _run(lambda: map(nested, [1, 2], out), TypeError, "cannot be sent", out)


def test_fn_whose_module_workers_cannot_import(tmp_path: Path) -> None:
    # A module loaded from a file outside sys.path (as pytest loads test modules): pickling its
    # functions works in the parent, but a spawned worker could not import them.
    source = tmp_path / "elsewhere" / "hidden_fns_module.py"
    source.parent.mkdir()
    source.write_text("def fn(i):\n    return i\n")
    spec = importlib.util.spec_from_file_location("hidden_fns_module", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hidden_fns_module"] = module
    try:
        spec.loader.exec_module(module)
        out = tmp_path / "out"
        call = lambda: optimize(module.fn, [1, 2], out, chunk_size=2, num_workers=1)  # noqa: E731
        _run(call, TypeError, "cannot be loaded in forkserver worker processes", out)
    finally:
        del sys.modules["hidden_fns_module"]


def test_inputs_empty_or_not_a_sequence(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(lambda: optimize(fns.square, [], out, chunk_size=2), ValueError, "there is nothing to process", out)
    not_a_sequence: Any = {1}  # a set has no order; an iterator (a generator) is streamed instead
    _run(lambda: optimize(fns.square, not_a_sequence, out, chunk_size=2), ValueError, "must be a sequence", out)
    empty: Any = iter([])
    _run(lambda: optimize(fns.square, empty, out, chunk_size=2), ValueError, "yielded nothing", out)
    _run(lambda: map(fns.write_text, [], out), ValueError, "there is nothing to process", out)
    _run(lambda: optimize(fns.square, output_dir=str(out), chunk_size=2), ValueError, "exactly one of inputs", out)


def test_output_dir_not_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    _run(lambda: optimize(fns.square, [1], blocker / "out", chunk_size=2), PermissionError, "not writable")
    _run(lambda: map(fns.write_text, [1], blocker / "out"), PermissionError, "not writable")


def test_non_empty_output_without_a_mode(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fork: dict[str, Any] = {"num_workers": 1, "start_method": "fork", "verbose": False}
    optimize(fns.square, [1, 2, 3], out, chunk_size=2, **fork)
    for error in (DatasetExistsError, RuntimeError, ValueError, FileExistsError):  # upstream raises RuntimeError
        _run(lambda: optimize(fns.square, [1], out, chunk_size=2), error, "already holds an optimized dataset")
    # Files optimize does not write are left alone and the dataset is written next to them, as upstream does.
    other = tmp_path / "other"
    (other / "sub").mkdir(parents=True)
    (other / "notes.txt").write_text("mine")
    (other / "sub" / "x.bin").write_text("mine too")
    optimize(fns.square, [1, 2, 3], other, chunk_size=2, **fork)
    assert sorted(s["i"] for s in DatasetReader(other)) == [1, 2, 3]
    assert (other / "notes.txt").read_text() == "mine" and (other / "sub" / "x.bin").read_text() == "mine too"
    optimize(fns.square, [4], other, chunk_size=2, mode="overwrite", **fork)
    assert [s["i"] for s in DatasetReader(other)] == [4] and (other / "notes.txt").is_file()
    (out / "extra.txt").write_text("x")
    _run(lambda: map(fns.write_text, [1], out, error_when_not_empty=True), ValueError, "not empty")


def test_chunk_size_and_chunk_bytes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # Neither: 64MB chunks, as upstream documents (its graph examples pass neither).
    optimize(fns.square, [1, 2], tmp_path / "default", num_workers=1, start_method="fork", verbose=False)
    config = json.loads((tmp_path / "default" / "index.json").read_text())["config"]
    assert (config["chunk_bytes"], config["chunk_size"]) == (64_000_000, None)
    _run(lambda: optimize(fns.square, [1], out, chunk_size=2, chunk_bytes="1MB"), ValueError, "not both", out)
    _run(lambda: optimize(fns.square, [1], out, chunk_size=0), ValueError, "chunk_size", out)
    _run(lambda: optimize(fns.square, [1], out, chunk_bytes="lots"), ValueError, "chunk_bytes", out)
    _run(lambda: optimize(fns.square, [1], out, chunk_bytes="1MB", align_chunking=True), ValueError, "align", out)


def test_option_conflicts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    q: Any = mp.Queue()
    cases: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: optimize(fns.square, [1], out, chunk_size=2, mode="replace"), ValueError, "mode must be"),  # type: ignore[arg-type]
        (
            lambda: optimize(fns.square, [1], out, chunk_size=2, use_checkpoint=True, keep_data_ordered=False),
            ValueError,
            "keep_data_ordered=True",
        ),
        (lambda: optimize(fns.square, [1], out, queue=q, chunk_size=2), ValueError, "exactly one of inputs"),
        (lambda: optimize(fns.square, queue=[1], output_dir=str(out), chunk_size=2), TypeError, "multiprocessing"),
        (
            lambda: optimize(fns.square, queue=q, output_dir=str(out), chunk_size=2, use_checkpoint=True),
            ValueError,
            "static list",
        ),
        (lambda: optimize(fns.square, [1, 2], out, chunk_size=2, weights=[1]), ValueError, "weights"),
        (lambda: optimize(fns.square, [1], out, chunk_size=2, num_workers=-1), ValueError, "num_workers"),
        (lambda: optimize(fns.square, [1], out, chunk_size=2, start_method="telepathy"), ValueError, "start_method"),
        (lambda: optimize(fns.square, [1], out, chunk_size=2, compression="lzma"), ValueError, "lzma"),
        (lambda: optimize(fns.square, [1], out, chunk_size=2, num_nodes=2), ValueError, "DATA_OPTIMIZER_NUM_NODES"),
        (lambda: map(fns.write_text, [1], out, machine="A10G"), ValueError, "multi-node job"),
        (lambda: optimize(fns.square, [1], out, chunk_size=2, item_loader="tokens"), TypeError, "item_loader"),  # type: ignore[arg-type]
    ]
    for call, error, match in cases:
        _run(call, error, match, out)
    q.close()


_TRACED_FAILURE = """
import sys
from litdata_io import enable_tracer
from litdata_prep import optimize

def fn(i):
    if i == 7:
        raise ValueError(f"bad input {i}")
    return {"i": i}

if __name__ == "__main__":
    enable_tracer("batch", log_file=sys.argv[1])
    try:
        optimize(fn, list(range(12)), sys.argv[2], chunk_size=4, num_workers=2, verbose=False)
    except Exception as err:
        print(type(err).__name__)
"""


def test_a_worker_that_raises_writes_a_crash_event(tmp_path: Path) -> None:
    """An optimize worker whose fn raises records a ``crash`` instant in the tracer's log (its own process)."""
    script = tmp_path / "job.py"
    script.write_text(_TRACED_FAILURE)
    log = tmp_path / "litdata_debug.log"
    out = subprocess.run(
        [sys.executable, str(script), str(log), str(tmp_path / "out")], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == "WorkerError", out.stdout + out.stderr
    crashes = [line for line in log.read_text().splitlines() if "name: crash;" in line]
    assert len(crashes) == 1, crashes
    assert "position: 7;" in crashes[0] and "error: ValueError: bad input 7;" in crashes[0], crashes[0]


_UNGUARDED = """
import sys
import threading
from litdata_prep import optimize

# A thread runs: the default start method is then a forkserver, which imports this script again.
threading.Thread(target=threading.Event().wait, daemon=True).start()

def fn(i):
    return i

optimize(fn, list(range(4)), sys.argv[1], chunk_size=2, num_workers=1, verbose=False)
"""


def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path: Path) -> None:
    """The workers' copy of an unguarded script reaches optimize again: the error names the guard, not `python -c`."""
    script = tmp_path / "job.py"
    script.write_text(_UNGUARDED)
    argv = [sys.executable, str(script), str(tmp_path / "out")]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert out.returncode != 0
    told = "the script calls optimize/map when it is imported (no `if __name__ == '__main__':` guard)"
    assert told in out.stderr, out.stderr
    assert "interactive session" not in out.stderr, out.stderr
