"""Behaviour that matches upstream LitData 0.2.76, checked against the real thing in a side venv:
the mixing order of CombinedStreamingDataset, the chunks subsample takes, what optimize does with
the output folder, and the exception types."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter, FernetEncryption
from litdata_prep import optimize
from litdata_stream import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from tests.support.id_datasets import make_ids
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]


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
    dirs = [make_ids(tmp_path / str(d), n, 1000 * d) for d, n in enumerate((60, 37, 5, 200))]
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
    path = make_ids(tmp_path / "data", 100, 0)  # 15 chunks: 14 of 7 items and one of 2
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


ERRORS = """
import json, os, pickle, sys
from litdata import CombinedStreamingDataset, StreamingDataset, optimize
from litdata.utilities.encryption import FernetEncryption
cfg = json.loads(sys.argv[2])

def raised(call):
    try:
        call()
    except BaseException as error:
        return f"{type(error).__module__}:{type(error).__qualname__}"
    return None

wrong = FernetEncryption.load(cfg["key"], "wrong-pw")
out = {
    "existing_output": raised(lambda: optimize(str, [1], cfg["dataset"], chunk_size=2, num_workers=1)),
    "no_index": raised(lambda: StreamingDataset(cfg["empty_dir"])),
    "wrong_fernet_key": raised(lambda: StreamingDataset(cfg["encrypted"], encryption=wrong)[0]),
    "not_a_dataset": raised(lambda: CombinedStreamingDataset([StreamingDataset(cfg["dataset"]), "data"])),
    "empty_dataset": raised(lambda: StreamingDataset(cfg["empty_dataset"])),
}
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


def _type(name: str) -> type[BaseException]:
    module, qualname = name.split(":")
    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    assert isinstance(found, type) and issubclass(found, BaseException)
    return found


def test_errors_are_of_the_types_upstream_raises(tmp_path: Path) -> None:
    dataset = make_ids(tmp_path / "dataset", 10, 0)
    (tmp_path / "empty_dir").mkdir()
    encryption = FernetEncryption("secret-pw")
    writer = BinaryWriter(tmp_path / "encrypted", chunk_size=3, encryption=encryption)
    for i in range(5):
        writer.add_item(i, {"id": i})
    writer.done()
    writer.merge()
    encryption.save(str(tmp_path / "key.json"))
    optimize(_nothing, [1, 2], tmp_path / "empty_dataset", chunk_size=2, num_workers=1, start_method="fork",
             verbose=False)  # fmt: skip
    cfg = {
        "dataset": dataset,
        "empty_dir": str(tmp_path / "empty_dir"),
        "encrypted": str(tmp_path / "encrypted"),
        "key": str(tmp_path / "key.json"),
        "empty_dataset": str(tmp_path / "empty_dataset"),
    }
    upstream = run_upstream(ERRORS, json.dumps(cfg))
    assert upstream == {
        "existing_output": "builtins:RuntimeError",
        "no_index": "builtins:ValueError",
        "wrong_fernet_key": "cryptography.fernet:InvalidToken",
        "not_a_dataset": "builtins:RuntimeError",
        # Upstream refuses the empty dataset its own optimize writes; here it opens with len 0.
        "empty_dataset": "builtins:AssertionError",
    }
    with pytest.raises(_type(upstream["existing_output"]), match="already holds an optimized dataset"):
        optimize(str, [1], dataset, chunk_size=2, num_workers=1, start_method="fork", verbose=False)
    with pytest.raises(_type(upstream["no_index"]), match="no index.json here"):
        StreamingDataset(cfg["empty_dir"])
    wrong = FernetEncryption.load(cfg["key"], "wrong-pw")
    with pytest.raises(_type(upstream["wrong_fernet_key"]), match="the key is wrong"):
        StreamingDataset(cfg["encrypted"], encryption=wrong)[0]
    with pytest.raises(_type(upstream["not_a_dataset"]), match=r"datasets\[1\] is a str"):
        CombinedStreamingDataset([StreamingDataset(dataset), "data"])  # type: ignore[list-item]
    empty = StreamingDataset(cfg["empty_dataset"])
    assert len(empty) == 0 and list(empty) == [] and list(StreamingDataLoader(empty, batch_size=2)) == []


def _nothing(item: int) -> Any:
    yield from ()
