"""Root-process scenarios for tests/test_helper_fork.py, run as ``python -m tests.scripts.helper_fork``.

Each scenario is a real root process (a user's script) whose obstore helper is forked from it.
It prints one JSON line per observation. Arguments: the scenario name, then a JSON object with
the dataset URL, its ``storage_options``, the key of an object and a scratch folder.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from litdata_io import get_storage
from litdata_io._processes import _helper, _process


def report(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def helper_pid() -> int:
    connection = _helper._current  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    return connection.proc.pid


def signal_masks(pid: int) -> dict[str, int]:
    """The ignored and caught signal masks of ``pid``, from /proc."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: int(v, 16) for k, v in (line.split(":\t") for line in lines) if k in ("SigIgn", "SigCgt")}


def descriptors(pid: int) -> list[str]:
    """What each open descriptor of ``pid`` points to."""
    found = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.append(f"{name} {os.readlink(f'/proc/{pid}/fd/{name}')}")
        except FileNotFoundError:
            continue
    return found


def children() -> list[int]:
    """This process's child processes."""
    found: list[int] = []
    for task in os.listdir("/proc/self/task"):
        found.extend(int(pid) for pid in Path(f"/proc/self/task/{task}/children").read_text().split())
    return found


def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs in a DataLoader worker: the batch's indexes, and how this worker reaches the bucket."""
    return {
        "indexes": [int(s["index"]) for s in samples],
        "pid": os.getpid(),
        "placement": _process.obstore_placement(),
        "obstore_loaded": "obstore" in sys.modules,
        "children": children(),
    }


def streaming_loader(args: dict[str, Any]) -> None:
    """What benchmarks/runners/litdata_runner.py's stream does for stream-s3-cold-w2: the root reads
    index.json (through its helper), then StreamingDataLoader forks 2 workers (torch's default)."""
    from litdata_stream import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(
        args["url"], shuffle=True, storage_options=args["options"], cache_dir=str(Path(args["scratch"]) / "cache")
    )
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=2, collate_fn=collate)
    for batch in loader:
        report(where="worker", **batch)
    report(where="root", pid=os.getpid(), helper=helper_pid(), obstore_loaded="obstore" in sys.modules)


def _note_exit(marker: Path) -> None:
    with marker.open("a") as handle:
        handle.write(f"{os.getpid()}\n")


def leave_parent(args: dict[str, Any]) -> None:
    """Hold a pipe, a flock, a SIGTERM handler and an atexit handler, start the helper, then check what it kept."""
    scratch = Path(args["scratch"])
    scratch.mkdir(parents=True, exist_ok=True)
    atexit.register(_note_exit, scratch / "atexit.txt")
    signal.signal(signal.SIGTERM, lambda *_: None)  # a trainer's checkpoint-on-SIGTERM handler
    # Ctrl-C as a script run from a terminal has it: a pytest started in the background by a shell without
    # job control inherits SIGINT ignored, and Python then leaves it ignored (the root waited for ever).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    read_end, write_end = os.pipe()
    lock = (scratch / "lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    storage = get_storage(args["url"], args["options"])
    data = storage.get(args["key"]).decode()
    helper = helper_pid()
    pipe = f"pipe:[{os.fstat(write_end).st_ino}]"
    report(
        where="root",
        data=data,
        helper=helper,
        placement=_process.obstore_placement(),
        obstore_loaded="obstore" in sys.modules,
        pipe=pipe,
        helper_cmdline=Path(f"/proc/{helper}/cmdline").read_text().split("\0"),
        root_cmdline=Path(f"/proc/{os.getpid()}/cmdline").read_text().split("\0"),
        helper_fds=descriptors(helper),
        helper_signals=signal_masks(helper),
    )
    os.close(write_end)
    pipe_eof = os.read(read_end, 1) == b""  # no other process holds the write end
    lock.close()
    relock = (scratch / "lock").open("w")
    try:
        fcntl.flock(relock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no other process holds the locked file open
        lock_free = True
    except BlockingIOError:
        lock_free = False
    try:
        report(where="released", pipe_eof=pipe_eof, lock_free=lock_free)
        while True:  # the test sends SIGINT to the whole process group, as Ctrl-C in a terminal does
            time.sleep(0.01)
    except KeyboardInterrupt:
        pass
    again = storage.get(args["key"]).decode()  # through the same helper: Ctrl-C did not end it
    report(where="after-sigint", same=again == data, helper=helper_pid())
    os.environ["LOCAL_RANK"] = "1"  # what a trainer sets: no store client reads it, the helper stays
    unrelated = storage.get(args["key"]).decode()
    report(where="after-unrelated-env", same=unrelated == data, helper=helper_pid())
    os.environ["LITDATA_TEST_CHANGED"] = "1"  # a changed environment: the next call starts a helper that sees it
    changed = storage.get(args["key"]).decode()
    report(where="after-env", same=changed == data, helper=helper_pid())


def obstore_imported(args: dict[str, Any]) -> None:
    """Import obstore in the root first: its helper must be a fresh interpreter, not a fork of it."""
    import obstore  # noqa: F401 - what a user's own obstore code would do

    data = get_storage(args["url"], args["options"]).get(args["key"]).decode()
    helper = helper_pid()
    cmdline = Path(f"/proc/{helper}/cmdline").read_text().split("\0")
    report(where="root", data=data, helper=helper, helper_cmdline=cmdline, placement=_process.obstore_placement())


if __name__ == "__main__":
    scenarios = {"leave_parent": leave_parent, "obstore_imported": obstore_imported}
    scenarios["streaming_loader"] = streaming_loader
    scenarios[sys.argv[1]](json.loads(sys.argv[2]))
