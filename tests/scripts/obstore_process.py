"""Root-process scenarios for tests/test_obstore_process.py, run as ``python -m tests.scripts.obstore_process``.

Each scenario runs in a fresh interpreter (a real root process, as a user's script is) and prints
one JSON line per observation for the test to check. Arguments: the scenario name, then a JSON
object with the dataset URL, its ``storage_options`` and a scratch folder.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litdata_io import get_storage
from litdata_io._processes import _process

if TYPE_CHECKING:
    from litdata_stream import StreamingDataset

_SDKS = ("gcsfs", "adlfs", "s3fs")


def report(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def whoami() -> dict[str, Any]:
    """Which process this is and how it reaches the bucket."""
    return {
        "pid": os.getpid(),
        "placement": _process.obstore_placement(),
        "obstore_loaded": "obstore" in sys.modules,
        "sdks": sorted(name for name in _SDKS if name in sys.modules),
    }


def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs in the DataLoader worker: the batch's indexes and who read them."""
    return {"indexes": [int(s["index"]) for s in samples], **whoami()}


def stream(args: dict[str, Any]) -> None:
    """Stream in this root process, then with 2 workers started each way."""
    import torch.utils.data

    from litdata_stream import StreamingDataset

    scratch = Path(args["scratch"])

    def dataset(name: str) -> StreamingDataset:  # a cache of its own: the workers must download
        return StreamingDataset(args["url"], cache_dir=str(scratch / name), storage_options=args["options"])

    report(where="root", indexes=sorted(int(s["index"]) for s in dataset("w0")), **whoami())
    for context in args["contexts"]:
        loader = torch.utils.data.DataLoader(
            dataset(context), batch_size=5, num_workers=2, multiprocessing_context=context, collate_fn=collate
        )
        for batch in loader:
            report(where=context, **batch)
    report(where="root-after", **whoami())


def _child_reads(url: str, options: dict[str, Any], key: str, queue: Any) -> None:
    data = get_storage(url, options).get(key)
    queue.put({"data": data.decode(), **whoami()})


def forced_fork(args: dict[str, Any]) -> None:
    """obstore in this process (LITDATA_OBSTORE_PROCESS=here), then a forked child reads."""
    storage = get_storage(args["url"], args["options"])
    report(where="root", data=storage.get(args["key"]).decode(), **whoami())
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_reads, args=(args["url"], args["options"], args["key"], queue))
    child.start()
    report(where="child", **queue.get())
    child.join()


def _child_after_everything(helper_fd: int, helper_inode: int, queue: Any) -> None:
    from litdata_io import trace_instant
    from litdata_io.internal import activity_begin

    try:  # the descriptor's number may be reused already (multiprocessing opens /dev/null as stdin)
        helper_fd_closed = os.fstat(helper_fd).st_ino != helper_inode
    except OSError:
        helper_fd_closed = True
    threads_at_start = sorted(t.name for t in threading.enumerate())
    dataset = _DATASET[0]
    indexes = sorted(int(s["index"]) for s in dataset)  # the parent is in the middle of its own pass
    memory = get_storage("memory://fork-state")
    memory_data = memory.get("k.bin").decode()
    trace_instant("child-mark", "epoch")
    queue.put(
        {
            "helper_fd_closed": helper_fd_closed,
            "threads_at_start": threads_at_start,
            "threads_after": sorted(t.name for t in threading.enumerate()),
            "indexes": indexes,
            "memory": memory_data,
            "activity_token": activity_begin("child work"),
            **whoami(),
        }
    )


_DATASET: list[StreamingDataset] = []


def fork_after_everything(args: dict[str, Any]) -> None:
    """Use every per-process thing in this root process, fork, and let the child use them again."""
    from litdata_io import enable_tracer, trace_instant
    from litdata_io._processes import _helper
    from litdata_io.internal import ActivityBoard, activity, attach_activity
    from litdata_stream import StreamingDataset

    scratch = Path(args["scratch"])
    scratch.mkdir(parents=True, exist_ok=True)
    enable_tracer("chunk", log_file=scratch / "trace.log")
    trace_instant("parent-mark", "epoch")
    board = ActivityBoard(1)
    attach_activity(board.path, 0)
    dataset = StreamingDataset(args["url"], cache_dir=str(scratch / "cache"), storage_options=args["options"])
    _DATASET.append(dataset)
    items = iter(dataset)
    first = [int(next(items)["index"]) for _ in range(5)]  # a source, a prefetcher, pinned chunks, loop threads
    memory = get_storage("memory://fork-state")
    memory.put("k.bin", b"memory")
    connection = _helper._current  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with activity("parent work"):
        fd = connection.sock.fileno()
        child = context.Process(target=_child_after_everything, args=(fd, os.fstat(fd).st_ino, queue))
        child.start()
        report(where="child", **queue.get())
        child.join()
        report(where="board", activities=[[a.text for a in slot] for slot in board.read()])
    rest = [int(s["index"]) for s in items]
    again = get_storage(args["url"], args["options"]).get("index.json")
    report(where="root", indexes=sorted(first + rest), index_ok='"chunks"' in again.decode(), **whoami())
    trace = (scratch / "trace.log").read_text()
    report(where="trace", lines=[line for line in trace.splitlines() if "-mark" in line])
    board.close()


def hold_helper(args: dict[str, Any]) -> None:
    """Start the helper, say its pid, and wait to be killed."""
    from litdata_io._processes import _helper

    storage = get_storage(args["url"], args["options"])
    data = storage.get(args["key"]).decode()
    connection = _helper._current  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    report(where="root", data=data, helper=connection.proc.pid, **whoami())
    while True:
        time.sleep(1)


if __name__ == "__main__":
    scenarios = {"stream": stream, "forced_fork": forced_fork, "hold_helper": hold_helper}
    scenarios["fork_after_everything"] = fork_after_everything
    scenarios[sys.argv[1]](json.loads(sys.argv[2]))
