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
TORCH_LOADED_BY = []  # the process that imported torch, once this script was loaded


class _NotesTorch:
    def find_spec(self, name, path, target=None):
        if name == "torch" and not TORCH_LOADED_BY:
            TORCH_LOADED_BY.append(os.getpid())
        return None


sys.meta_path.insert(0, _NotesTorch())


def where_loaded(worker_id):
    main = sys.modules["__mp_main__"]
    ppid = os.getppid()
    # One write per line: print() writes its pieces one by one, and two workers share this pipe.
    os.write(1, f"worker {worker_id} {main.LOADED_BY == ppid} {main.TORCH_LOADED_BY == [ppid]}\\n".encode())


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
    # with torch imported at its top, 1-2 s per worker at every epoch. This script imports litdata only
    # under its main guard, so the server must load torch itself, or every worker would import it.
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
    workers = [line for line in lines if line.startswith("worker")]
    assert workers == ["worker 0 True True"] * 2 + ["worker 1 True True"] * 2


def _listed_times(folder: Path, times: int) -> Path:
    """A dataset of 4 chunk files whose index lists them ``times`` times over (4 * times chunks)."""
    import json

    if not (folder / "index.json").is_file():
        writer = BinaryWriter(folder, chunk_size=2)
        for i in range(8):
            writer.add_item(i, {"index": i, "v": np.arange(3)})
        writer.done()
        writer.merge()
    index = json.loads((folder / "index.json").read_bytes())
    entries = index["chunks"][:4]
    index["chunks"] = entries * times
    (folder / "index.json").write_text(json.dumps(index, sort_keys=True))
    return folder


def _opcodes(data: bytes) -> int:
    import pickletools

    return sum(1 for _ in pickletools.genops(data))


def test_a_spawned_worker_receives_the_index_as_columns(tmp_path: Path) -> None:
    """The pickled dataset holds its index as a few buffers: about as many pickle opcodes for 40k chunks as for 400.

    A dict, a ChunkInfo or a str per chunk would add opcodes per chunk; its bytes grow by about
    the file name and checksum per chunk (and 8 bytes per column).
    """
    import pickle

    sizes = {}
    for times in (100, 10_000):
        dataset = StreamingDataset(_listed_times(tmp_path / "data", times), shuffle=True)
        assert len(dataset) == 8 * times
        data = pickle.dumps(dataset)
        sizes[times] = (len(data), _opcodes(data))
        again = pickle.loads(data)
        assert len(again) == len(dataset)
        assert again.subsampled_files == dataset.subsampled_files
    (small_bytes, small_ops), (big_bytes, big_ops) = sizes[100], sizes[10_000]
    assert big_ops - small_ops < 50  # a few more frames of bytes, nothing per chunk (39,600 more)
    chunks = 4 * (10_000 - 100)
    text = len("chunk-0-0.bin") + len("xxh3:0123456789abcdef")  # the name and checksum of an entry, about
    assert big_bytes - small_bytes <= chunks * (text + 8 * 10), (small_bytes, big_bytes)
    loader = StreamingDataLoader(again, batch_size=64, num_workers=1, multiprocessing_context="spawn")
    batches = iter(loader)
    for _ in range(3):  # the worker reads from the columns it was sent
        assert {int(i) for i in next(batches)["index"]} <= set(range(8))
    del batches
