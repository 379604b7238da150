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
