"""One rank of a real torch.distributed (gloo) job that runs a whole matrix of loader settings.

Run by tests/test_ddp.py as W processes at once. The process group is set up once; then for
every dataset x num_workers x drop_last the rank iterates a StreamingDataLoader and the ranks
gather what each saw. Rank 0 writes one JSON record per setting.

argv: a JSON file with {"datasets": [[dir, size, batch_size, shuffle_env], ...], "workers": [...]},
and the output JSON path.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import warnings
from typing import Any

import torch.distributed as dist

from litdata_stream import StreamingDataLoader, StreamingDataset


def main() -> None:
    # A hung rank prints every thread's stack and exits, so the test says where it hung.
    faulthandler.dump_traceback_later(120, exit=True)
    spec_path, out = sys.argv[1:3]
    with open(spec_path) as handle:
        spec = json.load(handle)
    dist.init_process_group("gloo")
    records = []
    for directory, size, batch_size, posix_fast in spec["datasets"]:
        for workers in spec["workers"]:
            for drop_last in (True, False):
                if posix_fast:
                    os.environ["LITDATA_POSIX_FAST"] = "1"  # the window shuffle
                else:
                    os.environ.pop("LITDATA_POSIX_FAST", None)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # drop_last=False under DDP warns, by design
                    dataset = StreamingDataset(directory, shuffle=True, drop_last=drop_last)
                # forkserver, not fork: on CPython 3.11 a child forked while another thread of a
                # gloo rank holds the interpreter's thread-state lock hangs inside os.fork()
                # (PyOS_AfterFork_Child -> _PyThreadState_DeleteExcept; fixed in 3.12). This test
                # is about the batches every rank gets, not about that interpreter bug.
                context: dict[str, Any] = {"multiprocessing_context": "forkserver"} if workers else {}
                loader = StreamingDataLoader(dataset, batch_size=batch_size, num_workers=workers, **context)
                seen: list[int] = []
                count = 0
                for batch in loader:
                    seen.extend(int(i) for i in batch["index"])
                    count += 1
                    if drop_last:
                        dist.barrier()  # a rank with fewer batches would hang here
                gathered: list[object] = [None] * dist.get_world_size()
                dist.all_gather_object(gathered, {"seen": seen, "batches": count, "len": len(loader)})
                records.append(
                    {
                        "size": size,
                        "batch_size": batch_size,
                        "window": bool(posix_fast),
                        "workers": workers,
                        "drop_last": drop_last,
                        "ranks": gathered,
                    }
                )
    if dist.get_rank() == 0:
        with open(out, "w") as handle:
            json.dump(records, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
