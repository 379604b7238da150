"""A persistent DataLoader worker keeps its dataset copy and must advance the epoch itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset


@pytest.mark.parametrize("workers", [1, 2])
def test_persistent_workers_see_a_new_order_every_epoch(tmp_path: Path, workers: int) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=5)
    for i in range(40):
        writer.add_item(i, i)
    writer.done()
    writer.merge()

    def epochs(persistent: bool) -> list[list[int]]:
        dataset = StreamingDataset(tmp_path, shuffle=True)
        loader = StreamingDataLoader(dataset, batch_size=4, num_workers=workers, persistent_workers=persistent)
        return [[int(x) for batch in loader for x in batch] for _ in range(2)]

    plain, persistent = epochs(False), epochs(True)
    assert persistent == plain and plain[0] != plain[1]
