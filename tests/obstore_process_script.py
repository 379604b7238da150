"""Root-process scenarios for tests/test_obstore_process.py, run as ``python -m tests.obstore_process_script``.

Each scenario runs in a fresh interpreter (a real root process, as a user's script is) and prints
one JSON line per observation for the test to check. Arguments: the scenario name, then a JSON
object with the dataset URL, its ``storage_options`` and a scratch folder.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch.utils.data

from litdata_io import _process, get_storage
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


def hold_helper(args: dict[str, Any]) -> None:
    """Start the helper, say its pid, and wait to be killed."""
    from litdata_io import _helper

    storage = get_storage(args["url"], args["options"])
    data = storage.get(args["key"]).decode()
    connection = _helper._current  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    report(where="root", data=data, helper=connection.proc.pid, **whoami())
    while True:
        time.sleep(1)


if __name__ == "__main__":
    {"stream": stream, "forced_fork": forced_fork, "hold_helper": hold_helper}[sys.argv[1]](json.loads(sys.argv[2]))
