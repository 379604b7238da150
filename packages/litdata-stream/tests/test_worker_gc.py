"""A DataLoader worker freezes what it inherited: its collector walks only what the worker makes."""

from __future__ import annotations

import gc
import importlib
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader

views: Any = importlib.import_module("stream_views")


def _dataset(path: Path) -> Path:
    writer = BinaryWriter(path, chunk_size=3)
    for i in range(8):
        writer.add_item(i, {"index": i})
    writer.done()
    writer.merge()
    return path


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_workers_collector_leaves_what_it_inherited_alone(tmp_path: Path, context: str) -> None:
    dataset = views.CollectorView(_dataset(tmp_path / "data"))
    loader = StreamingDataLoader(dataset, batch_size=1, num_workers=2, multiprocessing_context=context)
    seen = list(loader)
    assert sorted(int(s["index"]) for s in seen) == list(range(8))
    assert all(int(s["frozen"]) > 1000 for s in seen), seen  # torch's and litdata's objects, at least
    # What the worker inherited is not walked; a cycle made while reading is still collected.
    assert {(int(s["walks_import"]), int(s["cycle_collected"])) for s in seen} == {(0, 1)}


def test_the_main_process_is_never_frozen(tmp_path: Path) -> None:
    before = gc.get_freeze_count()
    seen = list(StreamingDataLoader(views.CollectorView(_dataset(tmp_path / "data")), batch_size=1))
    assert gc.get_freeze_count() == before
    assert {int(s["walks_import"]) for s in seen} == {1}
