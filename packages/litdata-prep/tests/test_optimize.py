"""optimize on local disk: what fn returns or yields, ordering, modes, layouts, errors and crashes."""

from __future__ import annotations

import importlib
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from litdata_format import DatasetReader, FernetEncryption, Image, TokensLoader, checksum_file, load_index
from litdata_io import Dir
from litdata_prep import ALL_DONE, WorkerError, optimize
from litdata_prep._output import Output, make_staging

fns: Any = importlib.import_module("prep_fns")
FORK = {"start_method": "fork", "verbose": False}


def read(path: Path, **kwargs: Any) -> list[Any]:
    return list(DatasetReader(path, **kwargs))


@pytest.mark.parametrize("start_method", ["spawn", "forkserver", "fork"])
def test_return_one_sample_per_input(tmp_path: Path, start_method: str) -> None:
    optimize(fns.square, list(range(40)), tmp_path / "out", chunk_size=6, num_workers=2, start_method=start_method)
    samples = read(tmp_path / "out")
    assert sorted(s["i"] for s in samples) == list(range(40))
    assert all(s["sq"] == s["i"] ** 2 for s in samples)
    assert not list((tmp_path / "out").glob(".litdata-staging-*"))


@pytest.mark.parametrize("start_method", ["spawn", "forkserver", "fork"])
def test_a_workers_collector_leaves_what_it_inherited_alone(tmp_path: Path, start_method: str) -> None:
    # What a worker inherited or imported before the job (a forkserver's torch, the forking parent's
    # heap) is frozen: a full collection in fn's allocations never walks it, nor copies its pages.
    optimize(fns.collector_view, [0, 1], tmp_path / "out", chunk_size=1, num_workers=2, start_method=start_method,
             verbose=False)  # fmt: skip
    seen = read(tmp_path / "out")
    assert all(s["frozen"] > 1000 for s in seen), seen  # the imports, at least
    assert [(s["walks_import"], s["cycle_collected"]) for s in seen] == [(0, 1), (0, 1)]  # fn's garbage still goes


def test_a_spawned_worker_writing_locally_loads_no_storage_layer(tmp_path: Path) -> None:
    # Start-up of a spawned worker is paid on every call: a local job imports neither asyncio nor the cache.
    optimize(
        fns.modules_loaded,
        list(range(4)),
        tmp_path / "out",
        chunk_size=2,
        num_workers=2,
        start_method="spawn",
        verbose=False,
    )
    assert [(s["cache"], s["asyncio"]) for s in read(tmp_path / "out")] == [(0, 0)] * 4


def test_default_workers_come_from_a_forkserver_with_the_callers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    # Another thread runs in this process, so the default workers cannot be forked from it.
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait, daemon=True)
    busy.start()
    try:
        _forkserver_workers_see_the_callers_environment(tmp_path, monkeypatch)
    finally:
        stop.set()
        busy.join()


def _forkserver_workers_see_the_callers_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("LITDATA_TEST_VALUE", "first")
    optimize(fns.parent_pid_and_env, [0, 1], tmp_path / "a", chunk_size=1, num_workers=2, verbose=False)
    first = read(tmp_path / "a")
    assert {s["env"] for s in first} == {"first"}
    assert os.getpid() not in {s["ppid"] for s in first}  # forked by the server, not by this process
    # The server started with the first job; the environment of the second job still reaches fn.
    monkeypatch.setenv("LITDATA_TEST_VALUE", "second")
    optimize(fns.parent_pid_and_env, [0, 1], tmp_path / "b", chunk_size=1, num_workers=2, verbose=False)
    assert {s["env"] for s in read(tmp_path / "b")} == {"second"}
    monkeypatch.delenv("LITDATA_TEST_VALUE")
    optimize(fns.parent_pid_and_env, [0, 1], tmp_path / "c", chunk_size=1, num_workers=2, verbose=False)
    assert {s["env"] for s in read(tmp_path / "c")} == {"<unset>"}
    optimize(fns.parent_pid_and_env, [0], tmp_path / "d", chunk_size=1, num_workers=1, start_method="spawn")
    assert [s["ppid"] for s in read(tmp_path / "d")] == [os.getpid()]


_TORCH_FIRST = """\
import torch
import filecmp, json, os, sys, threading
import litdata
from litdata_format import DatasetReader

OUT = sys.argv[1]


def fn(i):
    # Where the sample was made goes beside the dataset, so the datasets of every start method can be compared.
    with open(os.path.join(OUT, "marks", f"{os.getpid()}"), "w") as handle:
        handle.write(f"{os.getppid()} {torch.get_num_threads()}")
    return {"i": i, "x": torch.arange(i % 7, dtype=torch.int32), "square": float(i * i)}


def run(name, **kwargs):
    marks = os.path.join(OUT, "marks")
    for mark in os.listdir(marks):
        os.remove(os.path.join(marks, mark))
    out = os.path.join(OUT, name)
    litdata.optimize(fn, list(range(300)), out, chunk_bytes=2000, num_workers=2, keep_data_ordered=True, **kwargs)
    made = {open(os.path.join(marks, m)).read() for m in os.listdir(marks)}
    forked = all(int(m.split()[0]) == os.getpid() for m in made)
    threads = {int(m.split()[1]) for m in made}
    print(name, "forked" if forked else "not-forked", sorted(threads), flush=True)
    return out


def same(a, b):
    # Every byte, but the index's time stamp.
    names = sorted(os.listdir(a))
    index = [json.load(open(os.path.join(d, "index.json"))) for d in (a, b)]
    for one in index:
        one.pop("updated_at")
    chunks = [n for n in names if n != "index.json"]
    files = all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in chunks)
    return names == sorted(os.listdir(b)) and len(chunks) > 2 and files and index[0] == index[1]


if __name__ == "__main__":
    os.makedirs(os.path.join(OUT, "marks"))
    x = torch.randn(300, 300)
    (x @ x).sum()  # torch's intra-op pool has run: its threads are idle now
    first = run("default")
    run("again")  # the first job's progress bar left a tqdm thread behind: stopped, it does not count
    stop = threading.Event()
    busy = threading.Thread(target=stop.wait, name="busy")
    busy.start()
    run("thread")
    stop.set()
    busy.join()
    run("after")  # the forkserver the thread's job started runs now: it is warm, use it
    print("same-bytes", same(first, run("forkserver", start_method="forkserver")), flush=True)
"""


def test_a_script_importing_torch_forks_its_default_workers_unless_a_thread_runs(tmp_path: Path) -> None:
    # A forkserver imports the script, and so torch, again before the first worker (1.8-3 s); forking is
    # as safe as torch's DataLoader makes it when no other thread runs, whatever the script imported.
    script = tmp_path / "torch_first.py"
    script.write_text(_TORCH_FIRST)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], check=False, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("optimize")]
    assert lines == [
        "default forked [1]",  # one intra-op thread per worker, as torch's DataLoader workers have
        "again forked [1]",
        "thread not-forked [1]",
        "after not-forked [1]",
        "forkserver not-forked [1]",
        "same-bytes True",
    ], done.stdout + done.stderr
    told = [line for line in done.stdout.splitlines() if line.startswith("optimize: 300 inputs")]
    assert told[0].endswith(
        "2 fork workers (this process runs no other thread; torch's idle thread pools do not count, as for torch's "
        f"DataLoader) -> {tmp_path / 'default'}"
    ), told
    assert "2 fork workers" in told[1], told
    assert "2 forkserver workers (thread 'busy' runs in this process and could hold a lock" in told[2], told
    assert "2 forkserver workers (the forkserver this process started already runs" in told[3], told
    assert "2 forkserver workers (as asked)" in told[4], told


def test_a_script_whose_async_runtime_runs_does_not_fork(tmp_path: Path) -> None:
    # obstore's runtime (tokio threads, no Python thread) runs once a store was used.
    script = tmp_path / "runtime.py"
    script.write_text(
        "import os, sys\n"
        "import obstore\n"
        "from obstore.store import LocalStore\n"
        "import litdata\n"
        "from litdata_format import DatasetReader\n"
        "def fn(i):\n"
        "    return {'i': i, 'ppid': os.getppid()}\n"
        "if __name__ == '__main__':\n"
        "    obstore.put(LocalStore(sys.argv[1]), 'probe', b'x')\n"
        "    out = os.path.join(sys.argv[1], 'out')\n"
        "    litdata.optimize(fn, [0, 1], out, chunk_size=1, num_workers=2)\n"
        "    print(os.getpid() in {s['ppid'] for s in DatasetReader(out)})\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines()[-1] == "False", done.stdout + done.stderr
    assert "2 forkserver workers (native thread 'tokio-rt-worker' (an async runtime" in done.stdout, done.stdout


def test_a_script_without_the_main_guard_is_one_clear_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    # Workers from a forkserver (a thread runs, so they are not forked from the script) import the
    # script again; forked from a single-threaded script, they would not, and the job would run.
    script = tmp_path / "no_guard.py"
    script.write_text(
        "import threading, time\n"
        "import litdata\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "def fn(i):\n"
        "    return {'i': i}\n"
        f"litdata.optimize(fn, list(range(4)), {str(tmp_path / 'out')!r}, chunk_size=2, num_workers=2, verbose=False)\n"
    )
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "WorkerError" in last and "if __name__ == '__main__':" in last, done.stderr
    assert not (tmp_path / "out" / "index.json").exists()


def test_yield_many_none_or_filter(tmp_path: Path) -> None:
    optimize(fns.three_each, list(range(10)), tmp_path / "many", chunk_size=4, num_workers=2, **FORK)
    assert sorted((s["i"], s["k"]) for s in read(tmp_path / "many")) == [(i, k) for i in range(10) for k in range(3)]
    optimize(fns.even_only, list(range(20)), tmp_path / "even", chunk_bytes="1MB", num_workers=2, **FORK)
    assert sorted(read(tmp_path / "even")) == list(range(0, 20, 2))
    optimize(fns.inverse, [0, 0, 0, 1, 2, 4, 0], tmp_path / "inv", chunk_bytes="64MB", num_workers=1, **FORK)
    assert read(tmp_path / "inv") == [1.0, 0.5, 0.25]
    # No sample at all: an empty dataset, its index written as upstream writes it.
    optimize(fns.nothing, [1, 2], tmp_path / "none", chunk_size=2, num_workers=2, **FORK)
    assert [p.name for p in (tmp_path / "none").iterdir()] == ["index.json"]
    index = json.loads((tmp_path / "none" / "index.json").read_text())
    assert (index["chunks"], index["config"]) == ([], None)
    assert read(tmp_path / "none") == []
    optimize(fns.square, [5], tmp_path / "none", chunk_size=2, num_workers=1, mode="append", **FORK)
    assert [s["i"] for s in read(tmp_path / "none")] == [5]


def test_keep_data_ordered_keeps_input_order(tmp_path: Path) -> None:
    optimize(
        fns.identity, list(range(25)), tmp_path / "out", chunk_size=4, num_workers=2, keep_data_ordered=True, **FORK
    )
    assert read(tmp_path / "out") == list(range(25))
    names = [c.filename for c in load_index(tmp_path / "out").chunks]
    assert names[0] == "chunk-0-0.bin" and names[-1].startswith("chunk-1-")


def _layout(out: Path) -> list[tuple[str, int, int]]:
    return [(c.filename, (out / c.filename).stat().st_size, c.chunk_size) for c in load_index(out).chunks]


def test_by_default_workers_fill_whole_chunks_the_same_way_on_every_run(tmp_path: Path) -> None:
    """Each worker fills whole chunks from a contiguous slice of the inputs: at most one partial chunk per
    worker, the same files on every run, the samples in input order (issue 52: the shared queue made 13)."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for out in runs:
        optimize(fns.pair, list(range(1000)), out, chunk_size=64, num_workers=2, **FORK)
    assert _layout(runs[0]) == _layout(runs[1])
    expected = [(f"chunk-{rank}-{n}.bin", 64 if n < 7 else 52) for rank in (0, 1) for n in range(8)]
    assert [(name, items) for name, _, items in _layout(runs[0])] == expected
    assert read(runs[0]) == [(i, i**2) for i in range(1000)]
    # Appended samples come after, in chunks numbered after each worker's last.
    optimize(fns.pair, list(range(1000, 1100)), runs[0], chunk_size=64, num_workers=2, mode="append", **FORK)
    assert [name for name, _, _ in _layout(runs[0])[16:]] == ["chunk-0-8.bin", "chunk-1-8.bin"]
    assert read(runs[0]) == [(i, i**2) for i in range(1100)]
    # Small samples in 64 MB chunks: one chunk per worker, as upstream writes them.
    optimize(fns.pair, list(range(20_000)), tmp_path / "small", chunk_bytes="64MB", num_workers=4, **FORK)
    assert [name for name, _, _ in _layout(tmp_path / "small")] == [f"chunk-{rank}-0.bin" for rank in range(4)]
    # Weights balance contiguous slices: the order stays the inputs'.
    optimize(fns.identity, list(range(8)), tmp_path / "w", chunk_size=3, weights=[9, 1, 1, 1, 1, 1, 1, 1],
             num_workers=2, **FORK)  # fmt: skip
    assert read(tmp_path / "w") == list(range(8))
    assert [items for _, _, items in _layout(tmp_path / "w")] == [1, 3, 3, 1]


def test_the_shared_queue_keeps_input_order(tmp_path: Path) -> None:
    """The shared queue balances the workers and still publishes the samples in input order."""
    out, shared = tmp_path / "out", {"keep_data_ordered": False, **FORK}
    optimize(fns.slow_pair, list(range(300)), out, chunk_bytes="64MB", num_workers=2, **shared)
    optimize(fns.slow_pair, list(range(300, 600)), out, chunk_bytes="64MB", num_workers=2, mode="append", **shared)
    assert read(out) == [(i, i**2) for i in range(600)]
    ranks = {c.filename.split("-")[1] for c in load_index(out).chunks}
    assert ranks == {"0", "1"}  # both workers took inputs from the queue
    # Several samples per input, and samples filtered out, in order too.
    optimize(fns.three_each, list(range(90)), tmp_path / "many", chunk_size=7, num_workers=2, **shared)
    assert [(s["i"], s["k"]) for s in read(tmp_path / "many")] == [(i, k) for i in range(90) for k in range(3)]
    optimize(fns.even_only, list(range(200)), tmp_path / "even", chunk_bytes="1MB", num_workers=2, **shared)
    assert read(tmp_path / "even") == list(range(0, 200, 2))


def test_the_shared_queue_keeps_the_order_of_an_iterator(tmp_path: Path) -> None:
    """A generator's growing batches are runs of consecutive inputs too: its samples stay in input order."""
    out = tmp_path / "out"
    optimize(fns.slow_pair, (i for i in range(300)), out, chunk_bytes="64MB", num_workers=2, **FORK)
    assert read(out) == [(i, i**2) for i in range(300)]
    assert {c.filename.split("-")[1] for c in load_index(out).chunks} == {"0", "1"}  # both workers took some


def test_append_then_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ordered = {"keep_data_ordered": True, **FORK}
    optimize(fns.pair, list(range(10)), out, chunk_size=3, num_workers=2, **ordered)
    optimize(fns.pair, list(range(10, 20)), out, chunk_size=3, num_workers=2, mode="append", **ordered)
    assert read(out) == [(i, i**2) for i in range(20)]
    names = [c.filename for c in load_index(out).chunks]
    assert len(names) == len(set(names)) and all((out / n).is_file() for n in names)
    # Both runs' workers' checksums survive the merges, and match the files.
    assert all(c.extra["checksum"] == checksum_file(out / c.filename) for c in load_index(out).chunks)
    optimize(fns.pair, list(range(5)), out, chunk_size=3, num_workers=2, mode="overwrite", **ordered)
    assert read(out) == [(i, i**2) for i in range(5)]
    assert sorted(p.name for p in out.glob("chunk-*")) == sorted(c.filename for c in load_index(out).chunks)


def test_append_with_a_different_layout_is_refused(tmp_path: Path) -> None:
    optimize(fns.pair, list(range(4)), tmp_path / "out", chunk_size=3, num_workers=1, **FORK)
    with pytest.raises(ValueError, match="different sample layout"):
        optimize(fns.square, list(range(4)), tmp_path / "out", chunk_size=3, num_workers=1, mode="append", **FORK)
    assert read(tmp_path / "out") == [(i, i**2) for i in range(4)]


def test_workers_storing_images_differently_are_refused(tmp_path: Path) -> None:
    # Worker 0 stores JPEG files ("jpeg"), worker 1 raw pixels ("pil"): one index cannot describe both
    # (a reader decodes every item with the one serializer its config names), so nothing is published.
    with pytest.raises(ValueError, match=r"different sample layout .*data_format.*'jpeg'.*'pil'.*Jpeg\(\.\.\.\)"):
        optimize(fns.jpeg_then_pil, list(range(4)), tmp_path / "out", chunk_size=2, num_workers=2,
                 keep_data_ordered=True, **FORK)  # fmt: skip
    assert not (tmp_path / "out" / "index.json").exists()
    assert not list((tmp_path / "out").glob("chunk-*"))


def test_tokens(tmp_path: Path) -> None:
    optimize(fns.tokens, list(range(12)), tmp_path / "out", chunk_size=40, item_loader=TokensLoader(), **FORK)
    index = load_index(tmp_path / "out")
    assert index.item_loader == "TokensLoader"
    assert sum(c.dim or 0 for c in index.chunks) == 120
    blocks = read(tmp_path / "out", item_loader=TokensLoader(block_size=10))
    assert sorted(int(b[0]) for b in blocks) == [i * 10 for i in range(12)]


def make_image(i: int) -> dict[str, Any]:
    pixels = np.full((8, 8, 3), i * 10, dtype=np.uint8)
    return {"image": Image(array=pixels, quality=95, format="jpeg"), "label": i}


def test_images_with_the_image_wrapper(tmp_path: Path) -> None:
    optimize(make_image, list(range(6)), tmp_path / "out", chunk_bytes="64MB", num_workers=2, **FORK)
    samples = sorted(read(tmp_path / "out"), key=lambda s: s["label"])
    assert [s["label"] for s in samples] == list(range(6))
    assert load_index(tmp_path / "out").data_format[0].startswith("image:jp")
    assert tuple(samples[3]["image"].shape) == (3, 8, 8)
    assert abs(int(samples[3]["image"][0, 4, 4]) - 30) <= 3


def test_compression_encryption_batches_weights_and_dev_run(tmp_path: Path) -> None:
    optimize(fns.square_array, list(range(20)), tmp_path / "z", chunk_size=5, compression="zstd", num_workers=2, **FORK)
    assert all(p.name.endswith(".zstd.bin") for p in (tmp_path / "z").glob("chunk-*"))
    assert sorted(s["i"] for s in read(tmp_path / "z")) == list(range(20))

    fernet = FernetEncryption(password="secret", level="sample")
    optimize(fns.square, list(range(8)), tmp_path / "enc", chunk_size=3, encryption=fernet, num_workers=2, **FORK)
    assert b'"sq"' not in b"".join(p.read_bytes() for p in (tmp_path / "enc").glob("chunk-*"))
    assert sorted(s["i"] for s in read(tmp_path / "enc", encryption=fernet)) == list(range(8))

    optimize(fns.sum_batch, list(range(10)), tmp_path / "b", chunk_size=5, batch_size=3, num_workers=1, **FORK)
    assert read(tmp_path / "b") == [3, 12, 21, 9]

    optimize(fns.identity, list(range(6)), tmp_path / "w", chunk_size=2, weights=[5, 1, 1, 1, 1, 1], num_workers=2,
             keep_data_ordered=True, **FORK)  # fmt: skip
    assert sorted(read(tmp_path / "w")) == list(range(6))

    optimize(fns.identity, list(range(100)), tmp_path / "dev", chunk_size=5, fast_dev_run=True, num_workers=2,
             keep_data_ordered=True, **FORK)  # fmt: skip
    assert len(read(tmp_path / "dev")) == 20


def test_align_chunking_matches_one_worker(tmp_path: Path) -> None:
    optimize(fns.identity, list(range(23)), tmp_path / "one", chunk_size=4, num_workers=1, **FORK)
    optimize(
        fns.identity, list(range(23)), tmp_path / "three", chunk_size=4, num_workers=3, align_chunking=True, **FORK
    )
    assert [c.chunk_size for c in load_index(tmp_path / "three").chunks] == [4, 4, 4, 4, 4, 3]
    assert read(tmp_path / "three") == read(tmp_path / "one") == list(range(23))


def produce(q: Any, n: int) -> None:
    for i in range(n):
        q.put((i, i**2))
    q.put(ALL_DONE)


def test_queue_ended_by_one_all_done(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue(maxsize=10)
    producer = ctx.Process(target=produce, args=(q, 50))
    producer.start()
    optimize(
        fns.identity, queue=q, output_dir=str(tmp_path / "out"), chunk_size=7, num_workers=2, mode="overwrite", **FORK
    )
    producer.join(timeout=10)
    assert sorted(read(tmp_path / "out")) == [(i, i**2) for i in range(50)]


_QUEUE_FN_FAILS = """
from multiprocessing import Process, Queue

import litdata_prep
from litdata_prep import ALL_DONE


def fn(item):
    return undefined_name(item)


def producer(q):
    for i in range(1000):
        q.put((i, i**2))
    q.put(ALL_DONE)


if __name__ == "__main__":
    q = Queue(maxsize=100)
    Process(target=producer, args=(q,)).start()  # not a daemon: the interpreter's exit waits for it
    litdata_prep.optimize(fn=fn, queue=q, output_dir="out", num_workers=2, chunk_size=100, verbose=False)
"""


def test_a_queue_fed_optimize_that_fails_ends_the_script(tmp_path: Path) -> None:
    """fn raises on the first input: the script fails, though the user's producer is blocked on its full queue.

    optimize reads the queue to its ALL_DONE once it stopped, so the producer finishes and the
    interpreter's exit, which joins it, returns (before, the script hung there for ever)."""
    (tmp_path / "script.py").write_text(_QUEUE_FN_FAILS)
    done = subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "NameError: name 'undefined_name' is not defined" in done.stderr


@pytest.mark.timeout(60)  # a hang fails here; no timed assertion
def test_fn_error_names_the_input_and_carries_the_traceback(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"input 7 \(position 7") as info:
        optimize(fns.fail_on_seven, list(range(30)), tmp_path / "out", chunk_size=4, num_workers=2, verbose=False)
    assert info.value.position == 7 and info.value.input == "7"
    assert "ValueError: bad input 7" in (info.value.remote_traceback or "")
    assert "prep_fns.py" in str(info.value.__cause__)
    assert not (tmp_path / "out" / "index.json").exists()
    assert not list((tmp_path / "out").rglob("*.bin")), "the chunks written before the error are removed"
    assert mp.active_children() == []


def test_a_sample_the_writer_refuses_is_not_blamed_on_fn(tmp_path: Path) -> None:
    with pytest.raises(WorkerError) as caught:
        optimize(fns.vector_then_matrix, list(range(8)), tmp_path / "out", chunk_size=2, num_workers=1,
                 start_method="fork", verbose=False)  # fmt: skip
    message = str(caught.value)
    assert "a sample fn returned was refused for input 5 (position 5" in message, message
    assert "sample 5, leaf 1 (sample['v']): a 2-D array" in message, message
    assert not list((tmp_path / "out").glob("chunk-*")), "the chunks written before the error are removed"


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.timeout(60)  # a hang fails here; no timed assertion
def test_a_killed_worker_is_one_clear_error(tmp_path: Path, ordered: bool) -> None:
    with pytest.raises(WorkerError, match="killed by SIGKILL"):
        optimize(fns.die_on_five, list(range(30)), tmp_path / "out", chunk_size=4, num_workers=2,
                 keep_data_ordered=ordered, **FORK)  # fmt: skip
    assert not (tmp_path / "out" / "index.json").exists()
    assert not list((tmp_path / "out").rglob("*.bin"))
    assert mp.active_children() == []


def test_unpicklable_input_is_an_error_not_a_lost_sample(tmp_path: Path) -> None:
    # The shared queue pickles each batch in the parent: the input is named there.
    with pytest.raises(WorkerError, match="cannot be pickled"):
        optimize(fns.identity, [1, lambda: 2, 3], tmp_path / "out", chunk_size=2, num_workers=2,
                 keep_data_ordered=False, **FORK)  # fmt: skip
    # A forked worker's slice travels unpickled: the sample is what cannot be written.
    with pytest.raises(WorkerError, match=r"refused for input .*lambda.* \(position 1, worker 1\).*pickle"):
        optimize(fns.identity, [1, lambda: 2, 3], tmp_path / "out", chunk_size=2, num_workers=2, **FORK)


def test_remote_style_checkpoint_files_are_cleaned_up(tmp_path: Path) -> None:
    out = tmp_path / "out"
    optimize(fns.square, list(range(12)), out, chunk_size=2, num_workers=2, use_checkpoint=True, **FORK)
    assert not (out / ".checkpoints").exists() or not list((out / ".checkpoints").iterdir())
    assert sorted(s["i"] for s in read(out)) == list(range(12))
    assert json.loads((out / "index.json").read_text())["config"]["chunk_size"] == 2


def test_a_rerun_removes_the_temporary_files_a_killed_run_left(tmp_path: Path) -> None:
    # What kill -9 leaves mid-write: atomic_file's temporary names beside a checkpoint and the index.
    out = tmp_path / "out"
    (out / ".checkpoints").mkdir(parents=True)
    litter = [out / ".checkpoints" / ".checkpoint-1.json.k3j_9x0a.tmp", out / ".index.json.0a1b2c3d.tmp"]
    for path in litter:
        path.write_bytes(b'{"half')
    optimize(fns.square, list(range(12)), out, chunk_size=2, num_workers=2, use_checkpoint=True, **FORK)
    assert not any(path.exists() for path in litter)
    assert sorted(s["i"] for s in read(out)) == list(range(12))


def test_the_write_probe_of_a_job_not_yet_holding_the_lock_is_left_alone(tmp_path: Path) -> None:
    # Another job checks the output is writable before it waits for the lock: its probe's temporary file,
    # there for an instant, must not be removed by this job's cleanup (its rename then failed: "not writable").
    out = tmp_path / "out"
    out.mkdir()
    probe = out / "..litdata-write-probe-0123456789abcdef.k3j_9x0a.tmp"
    probe.write_bytes(b"")
    optimize(fns.square, list(range(12)), out, chunk_size=2, num_workers=2, **FORK)
    assert probe.exists()
    assert sorted(s["i"] for s in read(out)) == list(range(12))


def test_remote_staging_of_a_killed_job_is_removed_by_the_next_job(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    orphan = Path(tempfile.mkdtemp(prefix=f"litdata-optimize-{int(dead.stdout)}-"))  # its process is gone
    (orphan / "rank-0").mkdir()
    (orphan / "rank-0" / "chunk-0-0.bin").write_bytes(b"x")
    staging = make_staging(Output(Dir(url="s3://bucket/out")), 0, "optimize")
    try:
        assert not orphan.exists() and staging.is_dir()
        assert make_staging(Output(Dir(url="s3://bucket/out")), 0, "map").is_dir() and staging.is_dir()  # alive
    finally:
        for path in Path(tempfile.gettempdir()).glob(f"litdata-*-{os.getpid()}-*"):
            shutil.rmtree(path)


def test_progress_bar_and_verbose_false(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    optimize(fns.square, list(range(20)), tmp_path / "loud", chunk_size=5, num_workers=2, start_method="fork")
    out, err = capfd.readouterr()
    assert "item/s" in err and "20/20" in err
    assert "holds 20 samples in" in out
    optimize(fns.square, list(range(20)), tmp_path / "quiet", chunk_size=5, num_workers=2, **FORK)
    assert capfd.readouterr() == ("", "")
