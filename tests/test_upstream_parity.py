"""Behaviour that matches upstream LitData 0.2.76, checked against the real thing in a side venv:
the mixing order of CombinedStreamingDataset, the chunks subsample takes, what optimize does with
the output folder, and the exception types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter
from litdata_stream import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from tests.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def _make(path: Path, n: int, offset: int, chunk_size: int = 7) -> str:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, {"id": offset + i})
    writer.done()
    writer.merge()
    return str(path)


MIX = """
import json, pickle, sys
from litdata import CombinedStreamingDataset, StreamingDataset
cfg = json.loads(sys.argv[2])
datasets = [StreamingDataset(d) for d in cfg["dirs"]]
combined = CombinedStreamingDataset(datasets, seed=cfg["seed"], weights=cfg["weights"],
                                    iterate_over_all=cfg["iterate_over_all"])
with open(sys.argv[1], "wb") as f:
    pickle.dump([int(s["id"]) for s in combined], f)
"""


@pytest.mark.parametrize(
    ("sizes", "weights", "seed"),
    [
        ((60, 37), None, 42),  # iterate over all: weights follow sizes, exhausted datasets leave
        ((60, 37, 5), None, 7),
        ((60, 37), [0.3, 0.7], 42),  # stop at the first draw of an exhausted dataset
        ((200, 150, 90), [1, 2, 5], 2**40 + 3),
    ],
)
def test_the_mixing_order_is_upstreams(tmp_path: Path, sizes: tuple[int, ...], weights: Any, seed: int) -> None:
    dirs = [_make(tmp_path / str(d), n, 1000 * d) for d, n in enumerate(sizes)]
    cfg = {"dirs": dirs, "seed": seed, "weights": weights, "iterate_over_all": weights is None}
    upstream = run_upstream(MIX, json.dumps(cfg))

    def combined() -> CombinedStreamingDataset:
        datasets = [StreamingDataset(d) for d in dirs]
        return CombinedStreamingDataset(datasets, seed=seed, weights=weights, iterate_over_all=weights is None)

    assert [int(s["id"]) for s in combined()] == upstream
    # The loader makes the batches in the dataset (0 workers: in this process) from the same draws.
    loader = StreamingDataLoader(combined(), batch_size=4)
    assert [int(i) for batch in loader for i in batch["id"]] == upstream
    if weights is None:
        assert sorted(upstream) == sorted(1000 * d + i for d, n in enumerate(sizes) for i in range(n))
