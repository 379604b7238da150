"""Property: however a dataset is iterated, stopped and resumed, every epoch that runs to its end
yields each sample exactly once, and each pass reads the epoch it should (issue 20).

A run is a random sequence of passes over one dataset: direct iteration and StreamingDataLoaders
with 0-3 workers, each stopped after a random number of samples or batches (or not at all), and
resumes from the latest loader state into the same loader, a fresh loader, or a fresh dataset
iterated directly. The model follows each epoch as a chain of passes linked by resumes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("epoch_property")


def _dataset_dir(root: Path, n: int, chunk_size: int) -> Path:
    path = root / f"n{n}_c{chunk_size}"
    if not (path / "index.json").exists():
        writer = BinaryWriter(path, chunk_size=chunk_size)
        for i in range(n):
            writer.add_item(i, i)
        writer.done()
        writer.merge()
    return path


@dataclass
class _Saved:
    state: dict[str, Any]
    epoch: int
    chain: list[int]  # what the epoch delivered up to the state, across earlier resumes
    complete: bool
    loader: StreamingDataLoader


@dataclass
class _Run:
    path: Path
    n: int
    batch_size: int
    dataset: StreamingDataset
    loader: StreamingDataLoader | None = None
    last_epoch: int = 0  # of the latest pass over the live objects (0: none yet)
    resuming: _Saved | None = None  # loaded into the live objects, not iterated yet
    saved: _Saved | None = None
    live_chain: list[int] = field(default_factory=list)  # the latest pass's epoch so far
    completed: list[int] = field(default_factory=list)  # epochs checked whole

    def expected_epoch(self) -> tuple[int, list[int]]:
        """The epoch the next pass must read, and what that epoch already delivered."""
        resuming = self.resuming
        if resuming is None:
            return self.last_epoch + 1, []
        if resuming.complete:
            return resuming.epoch + 1, []
        return resuming.epoch, list(resuming.chain)

    def record(self, epoch: int, delivered: list[int], complete: bool) -> None:
        expected, chain = self.expected_epoch()
        assert epoch == expected, f"the pass read epoch {epoch}, expected {expected}"
        chain += delivered
        repeated = [i for i, k in Counter(chain).items() if k > 1]
        assert not repeated, f"epoch {epoch} delivered {repeated} twice"
        if complete:
            missing = sorted(set(range(self.n)) - set(chain))
            assert not missing, f"epoch {epoch} never delivered {missing}"
            self.completed.append(epoch)
        self.last_epoch, self.live_chain, self.resuming = epoch, chain, None

    def direct(self, stop: int | None) -> None:
        got: list[int] = []
        epoch = None
        iterator = iter(self.dataset)
        for sample in iterator:
            if epoch is None:
                epoch = self.dataset.current_epoch
            got.append(int(sample))
            if stop is not None and len(got) >= stop:
                break
        del iterator  # broken off: the generator is closed here
        assert epoch is not None
        self.record(epoch, got, complete=stop is None or len(got) < stop)

    def through_loader(self, workers: int, stop: int | None) -> None:
        if self.loader is None or self.loader.num_workers != workers:
            self.loader = StreamingDataLoader(self.dataset, batch_size=self.batch_size, num_workers=workers)
        loader = self.loader
        got: list[int] = []
        batches = 0
        iterator = iter(loader)
        for batch in iterator:
            got += [int(x) for x in batch]
            batches += 1
            if stop is not None and batches >= stop:
                break
        del iterator
        complete = stop is None or batches < stop
        state = loader.state_dict()
        assert state["current_epoch"] == loader.current_epoch
        epoch = state["pass_epoch"]  # the dataset's epoch the pass read (current_epoch counts the loader's passes)
        self.record(epoch, got, complete)
        self.saved = _Saved(state, epoch, list(self.live_chain), complete, loader)

    def resume(self, target: str, workers: int) -> None:
        saved = self.saved
        assert saved is not None
        if target == "same" and saved.loader is self.loader:
            saved.loader.load_state_dict(saved.state)
        else:
            self.dataset = StreamingDataset(self.path, shuffle=True, seed=self.n)
            self.loader = None
            if target == "direct":
                if saved.complete:
                    self.dataset.set_epoch(saved.epoch + 1)
                else:
                    self.dataset.load_state_dict(saved.state["dataset"])
            else:
                self.loader = StreamingDataLoader(self.dataset, batch_size=self.batch_size, num_workers=workers)
                self.loader.load_state_dict(saved.state)
        self.resuming = saved


_stop = st.one_of(st.none(), st.integers(1, 12))
_step = st.one_of(
    st.tuples(st.just("direct"), st.just(0), _stop),
    st.tuples(st.just("loader"), st.integers(0, 3), _stop),
    st.tuples(st.sampled_from(["same", "fresh", "direct-resume"]), st.integers(0, 3), st.none()),
)


@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(
    n=st.integers(1, 40),
    chunk_size=st.integers(1, 9),
    batch_size=st.integers(1, 5),
    steps=st.lists(_step, min_size=1, max_size=6),
)
def test_every_epoch_yields_every_sample_once_across_stops_and_resumes(
    data_root: Path, n: int, chunk_size: int, batch_size: int, steps: list[tuple[str, int, int | None]]
) -> None:
    path = _dataset_dir(data_root, n, chunk_size)
    run = _Run(path, n, batch_size, StreamingDataset(path, shuffle=True, seed=n))
    for kind, workers, stop in steps:
        if kind == "direct":
            run.direct(stop)
        elif kind == "loader":
            run.through_loader(workers, stop)
        elif run.saved is not None:
            if kind == "direct-resume":
                run.resume("direct", 0)
                run.direct(None)
            else:
                run.resume(kind, workers)
                run.through_loader(workers if run.loader is None else run.loader.num_workers, None)
    # Whatever came before, the live dataset's next pass reads the next epoch whole.
    run.direct(None)
