"""Functions the litdata-prep tests hand to optimize/map (importable in spawned workers)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np


def square(i: int) -> dict[str, int]:
    return {"i": i, "sq": i * i}


def square_array(i: int) -> dict[str, Any]:
    """``square`` with an array leaf: stored as PyTree items (dicts of JSON-like values are Arrow rows)."""
    return {"i": i, "sq": np.full(2, i * i)}


def varying_record(i: int) -> dict[str, Any]:
    """Records whose fields vary: list lengths, and a key only the later inputs have."""
    return {"i": i, "tags": ["t"] * (i % 3), **({"note": f"n{i}"} if i >= 15 else {})}


def pair(i: int) -> tuple[int, int]:
    return i, i**2


def slow_pair(i: int) -> tuple[int, int]:
    """``pair`` taking a while, so every worker of a shared queue gets some of the inputs."""
    time.sleep(0.005)
    return i, i**2


def even_only(i: int) -> Any:
    if i % 2 == 0:
        yield i


def three_each(i: int) -> Any:
    for k in range(3):
        yield {"i": i, "k": k}


def inverse(x: int) -> Any:
    try:
        yield 1 / x
    except ZeroDivisionError:
        return


def nothing(i: int) -> None:
    return None


def identity(x: Any) -> Any:
    return x


def tokens(i: int) -> np.ndarray:
    return np.arange(i * 10, i * 10 + 10, dtype=np.int32)


def fail_on_seven(i: int) -> int:
    if i == 7:
        raise ValueError(f"bad input {i}")
    return i


def die_on_five(i: int) -> int:
    if i == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def slow_square(i: int) -> dict[str, int]:
    time.sleep(0.01)
    return {"i": i, "sq": i * i}


def sum_batch(batch: list[int]) -> int:
    return sum(batch)


def write_text(i: int, output_dir: str) -> None:
    sub = Path(output_dir) / "sub"
    sub.mkdir(parents=True, exist_ok=True)
    (sub / f"{i}.txt").write_text(str(i * 2))


def write_then_fail_on_three(i: int, output_dir: str) -> None:
    with open(os.path.join(output_dir, f"{i}.txt"), "w") as f:
        f.write("half")
        if i == 3:
            raise ValueError("fn failed halfway through its file")
        f.write(" and whole")


def write_and_return(i: int, output_dir: str) -> int:
    return i


def count_rows(table: Any) -> dict[str, Any]:
    column = table.read().column("x").to_pylist()
    return {"n": len(column), "first": column[0]}


def file_len(path: str) -> dict[str, Any]:
    return {"name": os.path.basename(path), "size": os.path.getsize(path)}


def modules_loaded(i: int) -> dict[str, int]:
    """Which heavy modules the worker process has loaded when it runs fn."""
    import sys

    return {
        "i": i,
        "cache": int("litdata_io._cache._chunk_cache" in sys.modules),
        "asyncio": int("asyncio" in sys.modules),
    }


# A tracked object made when this module is imported: before the job starts in every worker
# (fork: in the parent; forkserver and spawn: while fn is unpickled).
MADE_AT_IMPORT: list[str] = ["made at import"]


def collector_view(i: int) -> dict[str, int]:
    """What the worker's garbage collector walks while fn runs, and whether a cycle fn makes is collected."""
    import gc
    import weakref

    class Node:
        pass

    node = Node()
    node.self = node  # pyright: ignore[reportAttributeAccessIssue]
    ref = weakref.ref(node)
    del node
    gc.collect()
    return {
        "i": i,
        "frozen": gc.get_freeze_count(),
        "walks_import": int(any(o is MADE_AT_IMPORT for o in gc.get_objects())),
        "cycle_collected": int(ref() is None),
    }


def parent_pid_and_env(i: int) -> dict[str, Any]:
    """The worker's parent process and one environment variable, as fn sees them."""
    return {"i": i, "ppid": os.getppid(), "env": os.environ.get("LITDATA_TEST_VALUE", "<unset>")}


def vector_then_matrix(i: int) -> dict[str, Any]:
    """A 1-D leaf that turns 2-D at input 5 (the writer must refuse it)."""
    vector = np.arange(4)
    return {"i": i, "v": vector.reshape(2, 2) if i == 5 else vector}


def jpeg_then_pil(i: int) -> dict[str, Any]:
    """A JPEG file for inputs 0 and 1 (stored as "jpeg"), a plain PIL image after (stored as "pil")."""
    import io

    from PIL import Image

    picture = Image.fromarray(np.full((8, 8, 3), i, dtype=np.uint8), mode="RGB")
    if i >= 2:
        return {"i": i, "image": picture}
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG")
    return {"i": i, "image": Image.open(buffer)}


def every_thousandth(i: int) -> int | None:
    """Keeps one input in a thousand: the job's cost is the inputs, not the samples."""
    return i if i % 1000 == 0 else None


def worker_pid(i: int) -> dict[str, int]:
    """The input and the pid of the worker process that ran fn on it."""
    return {"i": i, "pid": os.getpid()}


def leave_a_thread(i: int) -> dict[str, int]:
    """``worker_pid``, leaving a non-daemon thread that never ends: the worker process cannot exit by itself."""
    threading.Thread(target=threading.Event().wait, name="never-ends").start()
    return worker_pid(i)


class PidAndLockRemover:
    """Records the worker's pid under ``pids``, then removes the output's lock: publishing the index fails."""

    def __init__(self, output: str, pids: str) -> None:
        self.output, self.pids = output, pids

    def __call__(self, i: int) -> int:
        Path(self.pids, str(os.getpid())).touch()
        Path(self.output, ".litdata-lock").unlink(missing_ok=True)
        return i


def children_reaped() -> bool:
    """Whether every child process of this one ends and is reaped within a generous bound (a hang guard, not a timing).

    A job's workers that were still exiting when it returned end by themselves (and are reaped by
    the next job, or here by ``multiprocessing.active_children``).
    """
    deadline = time.monotonic() + 30
    while mp.active_children() and time.monotonic() < deadline:
        time.sleep(0.02)
    return mp.active_children() == []
