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


# Runs a list of jobs in one upstream process (starting it is the slow part).
READ_IDS = """
import json, pickle, sys
from litdata import CombinedStreamingDataset, StreamingDataset
out = []
for job in json.loads(sys.argv[2]):
    datasets = [StreamingDataset(d, subsample=job["subsample"], shuffle=job["shuffle"], seed=job["seed"])
                for d in job["dirs"]]
    if job["mix"]:
        datasets = [CombinedStreamingDataset(datasets, seed=job["seed"], weights=job["weights"],
                                             iterate_over_all=job["weights"] is None)]
    out.append([int(s["id"]) for s in datasets[0]])
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


def _job(dirs: list[str], mix: bool, seed: int = 42, weights: Any = None, subsample: float = 1.0,
         shuffle: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"dirs": dirs, "mix": mix, "seed": seed, "weights": weights, "subsample": subsample, "shuffle": shuffle}


def _ours(job: dict[str, Any]) -> StreamingDataset | CombinedStreamingDataset:
    datasets = [
        StreamingDataset(d, subsample=job["subsample"], shuffle=job["shuffle"], seed=job["seed"]) for d in job["dirs"]
    ]
    if not job["mix"]:
        return datasets[0]
    weights = job["weights"]
    return CombinedStreamingDataset(datasets, seed=job["seed"], weights=weights, iterate_over_all=weights is None)


def _ids(dataset: Any) -> list[int]:
    return [int(s["id"]) for s in dataset]


def test_the_mixing_order_is_upstreams(tmp_path: Path) -> None:
    dirs = [_make(tmp_path / str(d), n, 1000 * d) for d, n in enumerate((60, 37, 5, 200))]
    jobs = [
        _job(dirs[:2], mix=True),  # iterate over all: weights follow sizes, exhausted datasets leave
        _job(dirs[:3], mix=True, seed=7),
        _job(dirs[:2], mix=True, weights=[0.3, 0.7]),  # stops at the first draw of an exhausted dataset
        _job([dirs[3], dirs[1], dirs[0]], mix=True, weights=[1, 2, 5], seed=2**31 + 3),
        _job(dirs[:2], mix=True, subsample=0.5),  # mixing subsampled datasets
    ]
    upstream = run_upstream(READ_IDS, json.dumps(jobs))
    for job, theirs in zip(jobs, upstream):
        assert _ids(_ours(job)) == theirs, job
        # The loader makes the batches in the dataset (0 workers: in this process) from the same draws.
        loader = StreamingDataLoader(_ours(job), batch_size=4)
        assert [int(i) for batch in loader for i in batch["id"]] == theirs, job
    assert sorted(upstream[0]) == list(range(60)) + list(range(1000, 1037))


def test_subsample_takes_the_chunks_upstream_takes(tmp_path: Path) -> None:
    path = _make(tmp_path / "data", 100, 0)  # 15 chunks: 14 of 7 items and one of 2
    jobs = [
        _job([path], mix=False, subsample=0.25),
        _job([path], mix=False, subsample=0.25, shuffle=True),
        _job([path], mix=False, subsample=0.3, shuffle=True, seed=7),
        _job([path], mix=False, subsample=2.3, shuffle=True),
        _job([path], mix=False, subsample=1.5),
        _job([path], mix=False, subsample=0.001),
    ]
    upstream = run_upstream(READ_IDS, json.dumps(jobs))
    for job, theirs in zip(jobs, upstream):
        ours = _ids(_ours(job))
        if job["shuffle"] or job["subsample"] > 1:
            assert sorted(ours) == sorted(theirs), job  # the same items (the order is the epoch's shuffle)
        else:
            assert ours == theirs, job
    # 0.25 of 100 = 25 items: the first three chunks and 4 items of the fourth, so 4 chunks are read.
    assert upstream[0] == list(range(25))
    assert len({i // 7 for i in upstream[1]}) <= 5  # shuffled: whole chunks still (one may be the 2-item one)
    assert upstream[5] == []
