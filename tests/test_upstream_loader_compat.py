"""Switching the other way: a state dict saved by this library's StreamingDataLoader loads in upstream
LitData 0.2.76 (in its side venv) and upstream continues from it; and two of upstream's loader
behaviours that code written for it sees (``len(iter(dataset))``, how ``current_epoch`` counts)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from litdata_stream import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from tests.support.id_datasets import flat, id_batches, make_ids
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]

N = 100

# Each job: a state dict saved here, loaded by a fresh upstream loader, whose epoch and batches are
# recorded. Plus upstream's own answers to len(iter(...)) and its loaders' current_epoch.
UPSTREAM = """
import json, pickle, sys
from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset

def batches(loader):
    return [[int(i) for i in batch["id"]] for batch in loader]

jobs, a, b = json.loads(sys.argv[2])
if jobs == "save":  # an upstream state 5 batches into epoch 1, and that whole epoch uninterrupted
    def shuffled():
        return StreamingDataLoader(StreamingDataset(a, shuffle=True, seed=3), batch_size=4, num_workers=2)
    full = batches(shuffled())
    loader = shuffled()
    for i, _ in enumerate(loader):
        if i == 4:
            break
    with open(sys.argv[1], "wb") as f:
        pickle.dump({"state": loader.state_dict(), "full": full}, f)
    sys.exit()
resumed = []
for job in jobs:
    loader = StreamingDataLoader(StreamingDataset(a, shuffle=job["shuffle"], seed=3), batch_size=4,
                                 num_workers=job["workers"])
    loader.load_state_dict(job["state"])
    rest = batches(loader)
    resumed.append({"epoch": loader.current_epoch, "rest": rest, "next": batches(loader)})

lengths = {"dataset": len(iter(StreamingDataset(a)))}
for name, make in (("combined", lambda: CombinedStreamingDataset([StreamingDataset(a), StreamingDataset(b)])),):
    try:
        lengths[name] = len(iter(make()))
    except TypeError:
        lengths[name] = "TypeError"

dataset = StreamingDataset(a, shuffle=True)
epochs = []
first = StreamingDataLoader(dataset, batch_size=4)
batches(first)
epochs.append(first.current_epoch)
second = StreamingDataLoader(dataset, batch_size=4)  # over a dataset already iterated
epochs.append(second.current_epoch)
batches(second)
epochs.append(second.current_epoch)
batches(second)
epochs.append(second.current_epoch)
with open(sys.argv[1], "wb") as f:
    pickle.dump({"resumed": resumed, "lengths": lengths, "epochs": epochs}, f)
"""


def _loader(path: str, shuffle: bool, workers: int) -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(path, shuffle=shuffle, seed=3), batch_size=4, num_workers=workers)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("loader-compat")
    a, b = make_ids(root / "a", N, 0, 7), make_ids(root / "b", 45, 1000, 5)
    jobs = []
    # (shuffle, workers, batches delivered here before saving; None: a whole epoch, then the state)
    for shuffle, workers, stop in ((False, 0, 6), (True, 0, 6), (False, 2, 5), (True, 2, 5), (True, 2, None)):
        loader = _loader(a, shuffle, workers)
        if stop is None:
            seen = flat(id_batches(loader))
        else:
            id_batches(loader)  # a whole epoch first: the state is of this loader's second pass
            seen = flat(id_batches(loader, stop))
        jobs.append({"shuffle": shuffle, "workers": workers, "stop": stop, "seen": seen, "state": loader.state_dict()})
    ours_rest = []
    for job in jobs:
        loader = _loader(a, job["shuffle"], job["workers"])
        loader.load_state_dict(job["state"])
        ours_rest.append((loader, flat(id_batches(loader))))
    saved = run_upstream(UPSTREAM, json.dumps(["save", a, b]))
    round_trip = _loader(a, True, 2)
    round_trip.load_state_dict(saved["state"])
    head = id_batches(round_trip, 3)
    upstream_jobs = [{k: job[k] for k in ("shuffle", "workers", "state")} for job in jobs]
    upstream_jobs.append({"shuffle": True, "workers": 2, "state": round_trip.state_dict()})
    found = run_upstream(UPSTREAM, json.dumps([upstream_jobs, a, b]))
    *resumed, back = found.pop("resumed")
    mine = {"jobs": jobs, "ours": ours_rest, "dirs": (a, b), "saved": saved}
    return mine | {"resumed": resumed, "round_trip_head": head, "round_trip": back, **found}


def test_upstream_loads_our_state_dict_and_resumes_the_epoch(upstream: dict[str, Any]) -> None:
    for job, run, (ours, ours_rest) in zip(upstream["jobs"], upstream["resumed"], upstream["ours"]):
        rest = flat(run["rest"])
        assert run["epoch"] == ours.current_epoch, job["stop"]
        if job["stop"] is None:
            # Saved after a whole pass: upstream reads its next epoch whole.
            assert sorted(rest) == list(range(N)) and run["epoch"] == job["state"]["current_epoch"] + 1
            continue
        assert run["epoch"] == job["state"]["current_epoch"] == 2
        # Upstream delivers exactly as many samples as the epoch had left here ...
        assert len(rest) == len(ours_rest) == N - len(job["seen"]), job
        if not job["shuffle"] and not job["workers"]:
            # ... and, where its order of the epoch is this library's (no shuffle, one reader), exactly those.
            assert rest == ours_rest and sorted(job["seen"] + rest) == list(range(N))
        # The epoch after it is upstream's own, whole.
        assert sorted(flat(run["next"])) == list(range(N))


def test_a_state_in_an_epoch_read_in_upstreams_order_resumes_exactly_in_upstream(upstream: dict[str, Any]) -> None:
    # Upstream's state loaded here, 3 more batches, saved here, loaded back in upstream: upstream
    # then gives exactly what it would have given next (the order of that epoch is its own).
    full, head, back = upstream["saved"]["full"], upstream["round_trip_head"], upstream["round_trip"]
    assert head == full[5:8]
    assert back["epoch"] == 1 and back["rest"] == full[8:]


def test_len_of_an_iterator_and_the_epoch_count_are_upstreams(upstream: dict[str, Any]) -> None:
    a, b = upstream["dirs"]
    assert len(iter(StreamingDataset(a))) == upstream["lengths"]["dataset"] == N  # pyright: ignore[reportArgumentType]  # a SizedPass
    combined = CombinedStreamingDataset([StreamingDataset(a), StreamingDataset(b)])
    with pytest.raises(TypeError):  # upstream's iterator of a Combined dataset has no len() either
        len(iter(combined))  # pyright: ignore[reportArgumentType]
    assert upstream["lengths"]["combined"] == "TypeError"

    dataset = StreamingDataset(a, shuffle=True)
    epochs, orders = [], []
    first = StreamingDataLoader(dataset, batch_size=4)
    orders.append(sorted(flat(id_batches(first))))
    epochs.append(first.current_epoch)
    second = StreamingDataLoader(dataset, batch_size=4)
    epochs.append(second.current_epoch)
    orders.append(flat(id_batches(second)))
    epochs.append(second.current_epoch)
    id_batches(second)
    epochs.append(second.current_epoch)
    assert epochs == upstream["epochs"] == [1, 0, 1, 2]
    # Unlike upstream's, the second loader read a new order (the dataset's epoch 2), not epoch 1's again.
    epoch_1 = flat(id_batches(StreamingDataLoader(StreamingDataset(a, shuffle=True), batch_size=4)))
    assert sorted(orders[1]) == orders[0] and orders[1] != epoch_1
