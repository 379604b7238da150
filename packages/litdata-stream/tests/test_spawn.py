"""Workers started with spawn get a pickled dataset: everything it holds must pickle."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset


def test_spawned_workers_read_everything(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=5)
    for i in range(23):
        writer.add_item(i, {"index": i, "v": np.arange(3)})
    writer.done()
    writer.merge()
    dataset = StreamingDataset(tmp_path, shuffle=True)
    dataset[0]  # decoders and the chunk source exist in the parent before the workers start
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context="spawn")
    seen = sorted(int(i) for batch in loader for i in batch["index"])
    assert seen == list(range(23))
    # With no worker there is no start method to use: upstream's docs pass one anyway; torch refuses it.
    in_process = StreamingDataLoader(dataset, batch_size=4, multiprocessing_context="spawn")
    assert sorted(int(i) for batch in in_process for i in batch["index"]) == list(range(23))


_SCRIPT = """
import os
import sys

LOADED_BY = os.getpid()  # the process that ran this script


def where_loaded(worker_id):
    main = sys.modules["__mp_main__"]
    # One write per line: print() writes its pieces one by one, and two workers share this pipe.
    os.write(1, f"worker {worker_id} {main.LOADED_BY == os.getppid()}\\n".encode())


if __name__ == "__main__":
    from litdata_stream import StreamingDataLoader, StreamingDataset

    loader = StreamingDataLoader(
        StreamingDataset(sys.argv[1]), batch_size=4, num_workers=2, multiprocessing_context="forkserver",
        worker_init_fn=where_loaded,
    )
    for epoch in range(2):
        print("epoch", epoch, sorted(int(i) for batch in loader for i in batch["index"]) == list(range(23)), flush=True)
"""


def test_forkserver_workers_find_the_script_loaded_by_the_server(tmp_path: Path) -> None:
    # CPython 3.11-3.13 forkserver workers would each run the script again (python/cpython#126631):
    # with torch imported at its top, 1-2 s per worker at every epoch.
    import subprocess
    import sys

    writer = BinaryWriter(tmp_path / "data", chunk_size=5)
    for i in range(23):
        writer.add_item(i, {"index": i})
    writer.done()
    writer.merge()
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "data")], check=True, capture_output=True, text=True, timeout=300
    )
    lines = sorted(done.stdout.split("\n"))
    assert [line for line in lines if line.startswith("epoch")] == ["epoch 0 True", "epoch 1 True"]
    assert [line for line in lines if line.startswith("worker")] == ["worker 0 True"] * 2 + ["worker 1 True"] * 2
