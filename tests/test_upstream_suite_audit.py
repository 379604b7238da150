"""What upstream LitData's own test files assert on public behaviour, checked on this library.

docs/compat.md lists, for each upstream test file audited, the differences found and whether they
are gone (a test here) or listed there with the reason. Each section below is named after the
upstream test file it answers; the tests are written for this library, not copied.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from litdata.streaming.writer import BinaryWriter

# --- tests/streaming/test_writer.py ----------------------------------------------------------


def test_an_unknown_compression_is_refused_in_upstreams_words(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="The provided compression something_else isn't available") as e:
        BinaryWriter(tmp_path, chunk_size=2, compression="something_else")
    assert "use 'zstd'" in str(e.value)  # and ours says what to give instead


def test_samples_are_added_with_item_assignment_too(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=5)
    for i in [2, 3, 1, 4, 6, 5, 7, 8, 11, 9, 10, 12]:  # out of order, as upstream allows
        writer[i] = i - 1
    writer.done()
    writer.merge()
    index = json.loads((tmp_path / "index.json").read_text())
    assert [c["chunk_size"] for c in index["chunks"]] == [5, 5, 2]
    for chunk in index["chunks"]:  # the index's byte counts are the files' sizes
        assert (tmp_path / chunk["filename"]).stat().st_size == chunk["chunk_bytes"]


def test_a_leaf_of_another_kind_is_refused_in_upstreams_words(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=5)
    writer[0] = {"x": 1, "y": np.zeros(2)}  # an array: not a row of JSON-like values, whose kinds may widen
    with pytest.raises(TypeError, match="The provided item should be of type") as e:
        writer[1] = {"x": "two", "y": np.zeros(2)}
    assert "sample 1" in str(e.value) and "sample['x']" in str(e.value)  # ours names the sample and leaf


def test_eleven_rank_indexes_merge_in_rank_order(tmp_path: Path) -> None:
    for rank in range(11):  # "10.index.json" sorts before "2.index.json" as text
        writer = BinaryWriter(tmp_path, chunk_size=1, rank=rank)
        writer[rank] = rank
        writer.done()
    BinaryWriter(tmp_path, chunk_size=1).merge(num_workers=11)
    index = json.loads((tmp_path / "index.json").read_text())
    assert [c["filename"] for c in index["chunks"]] == [f"chunk-{r}-0.bin" for r in range(11)]
