"""A training run switches from upstream LitData 0.2.76 to this library mid-epoch: the state dict
upstream's StreamingDataLoader saved (made by upstream in its side venv) loads here, and what
follows is what upstream gives next (its own resume, and its uninterrupted run), with no sample
repeated or skipped; where that order cannot be kept, a warning says so, and what cannot be
resumed at all is refused with the reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from litdata_stream import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from tests.support.id_datasets import flat, id_batches, make_ids
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]

# Each job: stop an upstream loader after `stop` batches and save its state; resume that state in a
# fresh upstream loader; and run the epoch uninterrupted. One upstream process runs every job.
UPSTREAM = """
import copy, json, pickle, sys
from litdata import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataLoader, StreamingDataset

def batches(loader, stop=None):
    out = []
    for batch in loader:
        out.append([int(i) for i in ids(batch)])
        if stop is not None and len(out) == stop:
            break
    return out

def make(job):
    datasets = [StreamingDataset(d, shuffle=job["shuffle"], seed=3, subsample=job.get("subsample", 1.0))
                for d in job["dirs"]]
    dataset = CombinedStreamingDataset(datasets, seed=5) if job["combined"] else datasets[0]
    if job.get("parallel"):
        dataset = ParallelStreamingDataset(datasets)
    return StreamingDataLoader(dataset, batch_size=4, num_workers=job["workers"])

def ids(batch):
    return batch["id"] if isinstance(batch, dict) else batch[0]["id"]

out = []
for job in json.loads(sys.argv[2]):
    loader = make(job)
    first = batches(loader, job["stop"])
    state = loader.state_dict()
    saved = copy.deepcopy(state)  # upstream's load_state_dict changes the dict it is given
    resumed = make(job)
    resumed.load_state_dict(state)
    if job.get("elastic"):  # resume on one worker (upstream's elastic restripe), then save again
        resumed = make({**job, "workers": 1})
        resumed.load_state_dict(state)
        first += batches(resumed, 3)
        saved = copy.deepcopy(resumed.state_dict())
        rest = []
    else:
        rest = batches(resumed)
    out.append({"first": first, "state": saved, "rest": rest, "full": batches(make(job))})
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


@pytest.fixture(scope="module")
def upstream_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("upstream-state")
    a, b = make_ids(root / "a", 100, 0, 7), make_ids(root / "b", 45, 1000, 5)
    jobs = [
        {"dirs": [a], "combined": False, "workers": w, "shuffle": s, "stop": stop}
        for w, s, stop in ((0, False, 5), (0, True, 7), (2, False, 5), (2, True, 5), (2, True, 12))
    ]
    jobs += [{"dirs": [a, b], "combined": True, "workers": w, "shuffle": True, "stop": 6} for w in (0, 2)]
    jobs.append({"dirs": [a], "combined": False, "workers": 2, "shuffle": True, "stop": 4, "elastic": True})
    jobs.append({"dirs": [a], "combined": False, "workers": 0, "shuffle": False, "stop": 2, "subsample": 0.5})
    jobs.append({"dirs": [a, b], "combined": False, "parallel": True, "workers": 0, "shuffle": False, "stop": 2})
    return jobs, run_upstream(UPSTREAM, json.dumps(jobs))


def _loader(job: dict[str, Any], workers: int | None = None) -> StreamingDataLoader:
    datasets = [StreamingDataset(d, shuffle=job["shuffle"], seed=3) for d in job["dirs"]]
    dataset = CombinedStreamingDataset(datasets, seed=5) if job["combined"] else datasets[0]
    return StreamingDataLoader(dataset, batch_size=4, num_workers=job["workers"] if workers is None else workers)


def test_a_single_dataset_continues_as_upstream_would(upstream_runs: Any) -> None:
    for job, run in zip(*upstream_runs):
        if job["combined"] or job.get("elastic") or job.get("subsample") or job.get("parallel"):
            continue
        assert run["first"] + run["rest"] == run["full"], job  # upstream's own resume is exact here
        loader = _loader(job)
        loader.load_state_dict(run["state"])
        ours = id_batches(loader)
        assert ours == run["rest"], job
        # Saved here mid-way through that epoch and resumed again: still upstream's order.
        loader = _loader(job)
        loader.load_state_dict(run["state"])
        head = id_batches(loader, 3)
        again = _loader(job)
        again.load_state_dict(loader.state_dict())
        assert head + id_batches(again) == run["rest"], job
        # The next epoch is this library's own: every sample once.
        assert sorted(flat(id_batches(again))) == list(range(100)), job


def test_another_worker_count_keeps_the_samples_and_warns(upstream_runs: Any) -> None:
    job, run = next((j, r) for j, r in zip(*upstream_runs) if j["workers"] == 2 and j["stop"] == 12)
    loader = _loader(job, workers=0)
    with pytest.warns(UserWarning, match=r"not in the order upstream would give them \(it was recorded with"):
        loader.load_state_dict(run["state"])
    rest = flat(id_batches(loader))
    assert sorted(rest) == sorted(flat(run["rest"]))  # no repeat, no skip
    assert sorted(flat(run["first"]) + rest) == list(range(100))


def test_a_combined_dataset_continues_with_what_upstream_had_not_delivered(upstream_runs: Any) -> None:
    runs = [(j, r) for j, r in zip(*upstream_runs) if j["combined"]]
    everything = list(range(100)) + list(range(1000, 1045))
    for job, run in runs:
        loader = _loader(job)
        if job["workers"] == 0:  # one worker: this library's draws are upstream's, the mix goes on as upstream's
            loader.load_state_dict(run["state"])
            assert run["first"] + id_batches(loader) == run["full"]
            continue
        with pytest.warns(UserWarning, match="mixed by new draws"):
            loader.load_state_dict(run["state"])
        rest = flat(id_batches(loader))
        # Upstream's own resume with workers repeats samples; here each sample comes once.
        assert sorted(flat(run["first"]) + rest) == everything


def test_what_cannot_be_resumed_is_refused_with_the_reason(upstream_runs: Any) -> None:
    for job, run in zip(*upstream_runs):
        if job.get("elastic"):
            with pytest.raises(ValueError, match="saved after an elastic resume"):
                _loader(job, workers=1).load_state_dict(run["state"])
        if job.get("subsample"):
            loader = StreamingDataLoader(StreamingDataset(job["dirs"][0], subsample=0.5, seed=3), batch_size=4)
            with pytest.raises(ValueError, match="subsampled dataset"):
                loader.load_state_dict(run["state"])
        if job.get("parallel"):
            parallel = ParallelStreamingDataset([StreamingDataset(d) for d in job["dirs"]])
            with pytest.raises(ValueError, match="ParallelStreamingDataset cannot be resumed here"):
                StreamingDataLoader(parallel, batch_size=4).load_state_dict(run["state"])
        if job["combined"]:  # the dataset part alone lacks the workers' counts: the error says where they are
            combined = CombinedStreamingDataset([StreamingDataset(d, shuffle=True, seed=3) for d in job["dirs"]])
            with pytest.raises(ValueError, match="give the loader's whole state dict"):
                combined.load_state_dict(run["state"]["dataset"])


# Upstream's split of an epoch over ranks and workers, and its in-chunk shuffle, for many layouts.
SPLITS = """
import json, pickle, sys
import numpy as np
from litdata.streaming.item_loader import Interval
from litdata.utilities.env import _DistributedEnv
from litdata.utilities.shuffle import _associate_chunks_and_intervals_to_workers, _block_shuffle
out = []
for lengths, visit, world, workers, batch, drop_last in json.loads(sys.argv[2]):
    intervals = [Interval(0, 0, lengths[c], lengths[c]) for c in visit]
    chunks, spans = _associate_chunks_and_intervals_to_workers(
        _DistributedEnv(world, 0, 1), visit, intervals, drop_last, workers, batch)
    parts = [(int(c), int(s[1]), int(s[2])) for cs, ss in zip(chunks, spans) for c, s in zip(cs, ss)]
    shuffled = [_block_shuffle(list(range(n)), w, np.random.RandomState([3, n, w])) for n in (1, 5, 9) for w in (0, 4)]
    out.append((parts, shuffled))
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


def test_the_split_of_an_epoch_is_upstreams_on_several_ranks() -> None:
    import random

    import numpy as np

    from litdata_stream._pass_plan import Topology
    from litdata_stream._upstream_state import _assign, _block_shuffle

    rng = random.Random(0)
    layouts = []
    for _ in range(40):
        lengths = [rng.randint(1, 12) for _ in range(rng.randint(1, 9))]
        visit = rng.sample(range(len(lengths)), len(lengths))
        world, workers, batch = rng.randint(1, 4), rng.randint(1, 3), rng.randint(1, 5)
        layouts.append((lengths, visit, world, workers, batch, rng.random() < 0.5))
    upstream = run_upstream(SPLITS, json.dumps(layouts))
    for (lengths, visit, world, workers, batch, drop_last), (parts, shuffled) in zip(layouts, upstream):
        assert _assign(lengths, visit, Topology(world, workers, batch, drop_last)) == parts
        ours = [_block_shuffle(list(range(n)), w, np.random.RandomState([3, n, w])) for n in (1, 5, 9) for w in (0, 4)]
        assert ours == shuffled
