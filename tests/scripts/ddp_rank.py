"""One rank of a real torch.distributed (gloo) job, run by tests/test_ddp.py as a subprocess.

argv: dataset dir, output json, batch size, num workers, stop after N batches (-1 = all),
state file to load (or "-"), state file to save (or "-").
"""

from __future__ import annotations

import json
import pickle
import sys

import torch.distributed as dist

from litdata_stream import StreamingDataLoader, StreamingDataset


def main() -> None:
    data, out, batch, workers, stop, load, save = sys.argv[1:8]
    dist.init_process_group("gloo")
    loader = StreamingDataLoader(StreamingDataset(data, shuffle=True), batch_size=int(batch), num_workers=int(workers))
    if load != "-":
        with open(load, "rb") as handle:
            loader.load_state_dict(pickle.load(handle))
    seen: list[int] = []
    count = 0
    for batch_data in loader:
        seen.extend(int(i) for i in batch_data["index"])
        count += 1
        dist.barrier()  # a rank with fewer batches would hang here
        if count == int(stop):
            break
    if save != "-" and dist.get_rank() == 0:
        with open(save, "wb") as handle:
            pickle.dump(loader.state_dict(), handle)
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, {"rank": dist.get_rank(), "seen": seen, "batches": count})
    if dist.get_rank() == 0:
        with open(out, "w") as handle:
            json.dump(gathered, handle)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
