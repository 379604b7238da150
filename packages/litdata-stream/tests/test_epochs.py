"""A new order every epoch however the dataset is iterated, following set_epoch; the epoch a pass
reads is the one its state dict records (issue 20)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import DataLoader

from litdata_format import BinaryWriter
from litdata_stream import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata_stream._protocol import PassReader

N = 40


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("epochs")
    writer = BinaryWriter(folder, chunk_size=6)
    for i in range(N):
        writer.add_item(i, i)
    writer.done()
    writer.merge()
    return folder


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("epochs_other")
    writer = BinaryWriter(folder, chunk_size=4)
    for i in range(25):
        writer.add_item(i, 1000 + i)
    writer.done()
    writer.merge()
    return folder


def _flat(batches: Any) -> list[int]:
    out: list[int] = []
    for batch in batches:
        out += [int(x) for x in batch] if hasattr(batch, "__len__") else [int(batch)]
    return out


def _reference(path: Path, epochs: int, workers: int = 0) -> list[list[int]]:
    """The orders of epochs 1 .. ``epochs`` as a StreamingDataLoader (batch size 1) reads them."""
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), num_workers=workers)
    return [_flat(loader) for _ in range(epochs)]


def _distinct_permutations(orders: list[list[int]], count: int = N) -> None:
    assert all(sorted(order) == list(range(count)) for order in orders)
    assert len({tuple(order) for order in orders}) == len(orders), "two epochs read the same order"


def test_direct_iteration_reads_a_new_epoch_every_pass(path: Path) -> None:
    dataset = StreamingDataset(path, shuffle=True)
    orders = []
    for epoch in (1, 2, 3):
        assert dataset.current_epoch == epoch
        orders.append([int(x) for x in dataset])
    assert dataset.current_epoch == 4  # a whole pass moves to the next epoch, as upstream
    _distinct_permutations(orders)
    assert orders == _reference(path, 3)


def test_a_broken_off_pass_still_gives_the_next_pass_a_new_epoch(path: Path) -> None:
    dataset = StreamingDataset(path, shuffle=True)
    first = next(iter(dataset))
    assert dataset.current_epoch == 1  # the broken-off pass read epoch 1 ...
    second = [int(x) for x in dataset]  # ... so this one reads epoch 2
    reference = _reference(path, 2)
    assert first == reference[0][0] and second == reference[1]


@pytest.mark.parametrize(("workers", "persistent"), [(0, False), (2, False), (2, True)])
def test_a_plain_dataloader_reads_a_new_epoch_every_pass(path: Path, workers: int, persistent: bool) -> None:
    dataset = StreamingDataset(path, shuffle=True)
    loader = DataLoader(dataset, batch_size=1, num_workers=workers, persistent_workers=persistent)
    orders = [_flat(loader) for _ in range(3)]
    _distinct_permutations(orders)
    assert orders == _reference(path, 3, workers)
    assert dataset.current_epoch == 4  # the parent's copy knows: its next pass reads epoch 4
    assert [int(x) for x in dataset] == _reference(path, 4)[3]


def test_set_epoch_is_followed_by_every_kind_of_pass(path: Path) -> None:
    dataset = StreamingDataset(path, shuffle=True)
    fifth = _reference(path, 5)[4]
    for _ in range(2):
        dataset.set_epoch(5)
        assert [int(x) for x in dataset] == fifth
        dataset.set_epoch(5)
        assert _flat(DataLoader(dataset, num_workers=2)) == _reference(path, 5, 2)[4]
    loader = StreamingDataLoader(dataset)
    dataset.set_epoch(5)
    assert _flat(loader) == fifth
    # The loader counts its own passes, as upstream's does; the epoch it read is the dataset's.
    assert loader.current_epoch == 1 and loader.state_dict()["pass_epoch"] == 5


def test_a_dataloader_with_spawned_workers_advances_the_parent(path: Path) -> None:
    dataset = StreamingDataset(path, shuffle=True)
    loader = DataLoader(dataset, num_workers=1, multiprocessing_context="spawn")
    orders = [_flat(loader) for _ in range(2)]
    assert orders == _reference(path, 2, 1) and dataset.current_epoch == 3


@pytest.mark.parametrize("how", ["direct", "dataloader-0", "dataloader-2"])
def test_combined_reads_a_new_epoch_every_pass(path: Path, other: Path, how: str) -> None:
    def combined() -> CombinedStreamingDataset:
        return CombinedStreamingDataset([StreamingDataset(path, shuffle=True), StreamingDataset(other, shuffle=True)])

    dataset = combined()
    if how == "direct":
        orders = [[int(x) for x in dataset] for _ in range(3)]
        reference = StreamingDataLoader(combined())
    else:
        workers = int(how.split("-")[1])
        loader = DataLoader(dataset, num_workers=workers)
        orders = [_flat(loader) for _ in range(3)]
        reference = StreamingDataLoader(combined(), num_workers=workers)
    everything = sorted([*range(N), *range(1000, 1025)])
    assert all(sorted(order) == everything for order in orders)
    assert len({tuple(order) for order in orders}) == 3
    assert orders == [_flat(reference) for _ in range(3)]
    assert dataset.current_epoch == 4


def test_a_peek_before_the_loader_leaves_resume_exact(path: Path) -> None:
    # Issue 20: next(iter(ds)) in the main process, then a 2-worker StreamingDataLoader.
    dataset = StreamingDataset(path, shuffle=True)
    next(iter(dataset))
    loader = StreamingDataLoader(dataset, batch_size=3, num_workers=2)
    seen: list[int] = []
    for i, batch in enumerate(loader):
        seen += _flat([batch])
        if i == 4:
            break
    assert loader.current_epoch == 1  # its first pass, as upstream counts; the order it read is epoch 2's
    state = loader.state_dict()
    assert state["dataset"]["epoch"] == state["pass_epoch"] == 2
    same = list(seen)
    loader.load_state_dict(state)  # the same loader resumed
    same += _flat(loader)
    assert sorted(same) == list(range(N))
    fresh = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=3, num_workers=2)
    fresh.load_state_dict(state)
    rest = _flat(fresh)
    assert sorted(seen + rest) == list(range(N)) and same == seen + rest
    assert fresh.current_epoch == 1
    uninterrupted = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=3, num_workers=2)
    _flat(uninterrupted)
    assert _flat(uninterrupted) == same  # epoch 2 as a loader reads it uninterrupted


def test_a_loaded_state_wins_over_set_epoch(path: Path) -> None:
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4)
    iterator = iter(loader)
    seen = _flat([next(iterator) for _ in range(3)])
    state = loader.state_dict()
    dataset = StreamingDataset(path, shuffle=True)
    resumed = StreamingDataLoader(dataset, batch_size=4)
    resumed.load_state_dict(state)
    dataset.set_epoch(7)  # a training loop's set_epoch before the resumed epoch: ignored, as upstream
    assert sorted(seen + _flat(resumed)) == list(range(N))
    dataset.set_epoch(7)  # followed once the resumed pass began
    assert _flat(resumed) == _reference(path, 7)[6]


def test_persistent_workers_resume_the_loaded_state_and_follow_set_epoch(path: Path) -> None:
    dataset = StreamingDataset(path, shuffle=True)
    loader = StreamingDataLoader(dataset, batch_size=3, num_workers=2, persistent_workers=True)
    reference = [_flat(StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=3, num_workers=2))]
    assert _flat(loader) == reference[0]
    seen: list[int] = []
    for i, batch in enumerate(loader):  # epoch 2, broken off
        seen += _flat([batch])
        if i == 2:
            break
    loader.load_state_dict(loader.state_dict())  # the workers' copies lack the resume point: new ones
    rest = _flat(loader)
    assert sorted(seen + rest) == list(range(N)) and loader.current_epoch == 2
    dataset.set_epoch(6)
    sixth = StreamingDataset(path, shuffle=True)
    sixth.set_epoch(6)
    assert _flat(loader) == _flat(StreamingDataLoader(sixth, batch_size=3, num_workers=2))
    assert loader.current_epoch == 3  # its third pass (the resumed one kept its number), reading epoch 6


def test_parallel_reads_a_new_epoch_every_pass(path: Path) -> None:
    parallel = ParallelStreamingDataset([StreamingDataset(path, shuffle=True)])
    orders = [[int(sample) for (sample,) in parallel] for _ in range(2)]
    _distinct_permutations(orders)
    assert orders == _reference(path, 2)


def test_a_second_loader_counts_its_own_passes_as_upstream_and_reads_a_new_epoch(path: Path) -> None:
    # Issue 26: upstream's StreamingDataLoader reports 1 in its first pass, whatever its dataset read before.
    dataset = StreamingDataset(path, shuffle=True)
    first = StreamingDataLoader(dataset)
    _flat(first)
    second = StreamingDataLoader(dataset)
    assert second.current_epoch == 0
    order = _flat(second)
    assert first.current_epoch == second.current_epoch == 1
    assert order == _reference(path, 2)[1]  # the dataset's epoch 2, not epoch 1's order again
    state = second.state_dict()
    assert state["current_epoch"] == 1 and state["pass_epoch"] == 2
    _flat(second)
    assert second.current_epoch == 2 and dataset.current_epoch == 4


def test_len_of_an_iterator_over_the_dataset_is_its_length(path: Path) -> None:
    # Issue 26: upstream's iter(dataset) is the dataset itself, so len() works on it.
    dataset = StreamingDataset(path)
    iterator = iter(dataset)
    assert len(iterator) == len(dataset) == N  # pyright: ignore[reportArgumentType]  # a SizedPass
    next(iterator)
    assert len(iterator) == N and len(list(iterator)) == N - 1  # pyright: ignore[reportArgumentType]  # a SizedPass


def _make_record(folder: str, paths: Any) -> None:
    """A forked process's dataset: its epoch record in ``folder`` (as TMPDIR), held until killed or told to stop."""
    import tempfile

    tempfile.tempdir = folder  # what TMPDIR gives a fresh process (the parent's choice is cached)
    dataset = StreamingDataset(str(paths.recv()))
    paths.send(PassReader(dataset).epochs.path)
    # Its own pipe, not a shared multiprocessing.Event: a waiter killed inside Event.wait leaves the
    # Event's condition counting a sleeper that never wakes, and Event.set then blocks forever.
    paths.poll(120)


def test_the_epoch_record_of_a_sigkilled_process_is_deleted_by_the_next_one(path: Path, tmp_path: Path) -> None:
    """Before, a dataset's ``$TMPDIR/litdata-epoch-*`` stayed until reboot when its process was SIGKILLed."""
    import multiprocessing
    import os
    import signal

    context = multiprocessing.get_context("fork")
    made: list[tuple[Any, str]] = []
    pipes: list[Any] = []
    for _ in range(2):
        mine, theirs = context.Pipe()
        pipes.append(mine)
        process = context.Process(target=_make_record, args=(str(tmp_path), theirs))
        process.start()
        mine.send(str(path))
        made.append((process, mine.recv()))
        if len(made) == 1:
            assert process.pid is not None
            os.kill(process.pid, signal.SIGKILL)
            process.join(30)
            assert Path(made[0][1]).exists()  # nobody removed it
    try:
        assert not Path(made[0][1]).exists()  # the second dataset's record swept it
        assert Path(made[1][1]).exists()
    finally:
        pipes[1].send("stop")
        made[1][0].join(30)
    assert not Path(made[1][1]).exists()  # a clean exit removes its own
    assert sorted(p.name for p in tmp_path.iterdir()) == []


class _OwnIter(StreamingDataset):
    """Its own ``__iter__``, which reads the loader's pass through the base one (and may iterate itself again)."""

    again = False

    def __iter__(self) -> Any:
        yield from super().__iter__()
        if self.again:  # a pass of its own after the loader's: it must not join the loader's pass again
            yield from (x + 1000 for x in super().__iter__())


@pytest.mark.parametrize("workers", [0, 2])
def test_a_subclass_own_iter_reads_the_loaders_passes_in_its_epochs(path: Path, workers: int) -> None:
    """A subclass's ``__iter__`` joins each pass of the loader (the reference orders, epoch after epoch), and
    the pass it joined is taken once: a second ``iter`` inside it is a pass of its own, over every sample."""
    expected = _reference(path, 3, workers)
    dataset = _OwnIter(path, shuffle=True)
    loader = StreamingDataLoader(dataset, num_workers=workers)
    assert [_flat(loader) for _ in range(3)] == expected and dataset.current_epoch == 4
    dataset.again = True
    extra = [x - 1000 for x in _flat(StreamingDataLoader(dataset)) if x >= 1000]
    assert sorted(extra) == list(range(N))
