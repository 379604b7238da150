"""ParallelStreamingDataset: tuples, transforms with seeded generators, cycling, exact resume."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from litdata_format import BinaryWriter
from litdata_stream import (
    CombinedStreamingDataset,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
    litdata_collate,
)


def _make(path: Path, n: int, offset: int, chunk_size: int = 6) -> Path:
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, offset + i)
    writer.done()
    writer.merge()
    return path


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return _make(tmp_path / "input_dir_1", 40, 0), _make(tmp_path / "input_dir_2", 25, 1000)


def _datasets(dirs: tuple[Path, ...], shuffle: bool = False) -> list[StreamingDataset]:
    return [StreamingDataset(input_dir=str(d), shuffle=shuffle) for d in dirs]


def _mix(samples: tuple[Any, ...], rngs: dict[str, Any]) -> list[float]:
    sample_1, sample_2 = samples
    rng = rngs["random"]
    return [
        rng.random() * sample_1 + rng.random() * sample_2,
        float(rngs["numpy"].random()),
        float(torch.rand(1, generator=rngs["torch"])),
        float(sample_1),
        float(sample_2),
    ]


def _rows(batches: list[Any]) -> list[tuple[float, ...]]:
    out = []
    for batch in batches:
        columns = batch if isinstance(batch, (list, tuple)) else [batch]
        out.extend(zip(*[c.tolist() for c in columns]))
    return out


def _take(loader: Any, count: int) -> list[Any]:
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == count:
            break
    return out


def test_upstream_examples(dirs: tuple[Path, Path]) -> None:
    parallel_dataset = ParallelStreamingDataset(_datasets(dirs))
    dataloader = StreamingDataLoader(parallel_dataset)
    pairs = [(int(batch_1), int(batch_2)) for batch_1, batch_2 in dataloader]
    assert pairs == [(i, 1000 + i) for i in range(25)]  # stops with the shorter dataset

    def transform(samples: tuple[Any, ...]) -> Any:
        sample_1, sample_2 = samples  # as many samples as wrapped datasets
        return sample_1 + sample_2  # example transformation

    parallel_dataset = ParallelStreamingDataset(_datasets(dirs), transform=transform)
    assert [int(b) for b in StreamingDataLoader(parallel_dataset)] == [1000 + 2 * i for i in range(25)]

    def transform_rngs(samples: tuple[Any, ...], rngs: dict[str, Any]) -> Any:
        sample_1, sample_2 = samples
        rng = rngs["random"]  # "random", "numpy" and "torch" keys available
        return rng.random() * sample_1 + rng.random() * sample_2

    parallel_dataset = ParallelStreamingDataset(_datasets(dirs), transform=transform_rngs)
    values = [float(b) for b in StreamingDataLoader(parallel_dataset)]
    again = [float(b) for b in StreamingDataLoader(ParallelStreamingDataset(_datasets(dirs), transform=transform_rngs))]
    assert values == again and len(set(values)) == 25

    dataset = StreamingDataset(input_dir=str(dirs[1]))
    cycled_dataset = ParallelStreamingDataset([dataset], length=100)
    assert len(cycled_dataset) == 100
    dataloader = StreamingDataLoader(cycled_dataset)
    assert [int(batch) for (batch,) in dataloader] == [1000 + i % 25 for i in range(100)]

    endless = StreamingDataLoader(ParallelStreamingDataset(_datasets(dirs), length=float("inf")), batch_size=10)
    with pytest.raises(TypeError, match="no len"):
        len(endless)
    taken = _take(endless, 12)
    assert [int(x) for b in taken for x in b[1]] == [1000 + i % 25 for i in range(120)]


@pytest.mark.parametrize("workers", [0, 2])
def test_cycling_continues_where_the_last_epoch_ended(dirs: tuple[Path, Path], workers: int) -> None:
    parallel = ParallelStreamingDataset(_datasets(dirs, shuffle=True), length=30)
    loader = StreamingDataLoader(parallel, batch_size=5, num_workers=workers)
    epochs = [_rows(list(loader)) for _ in range(4)]
    assert all(len(rows) == 30 for rows in epochs)
    firsts = [int(r[0]) for rows in epochs for r in rows]
    seconds = [int(r[1]) for rows in epochs for r in rows]
    # 120 draws: dataset 1 (40 samples) is read 3 times over, dataset 2 (25) 4.8 times over.
    assert sorted(firsts) == sorted(list(range(40)) * 3)
    assert sorted(Counter(seconds).values()) == [4] * 5 + [5] * 20 and set(seconds) == set(range(1000, 1025))
    if workers == 0:
        for start in range(0, 120, 40):
            assert sorted(firsts[start : start + 40]) == list(range(40))
        for start in range(0, 100, 25):
            assert sorted(seconds[start : start + 25]) == list(range(1000, 1025))
        assert firsts[:40] != firsts[40:80]  # each pass is a new epoch of the dataset: another order

    same = StreamingDataLoader(ParallelStreamingDataset(_datasets(dirs, True), length=30, resume=False), batch_size=5)
    assert _rows(list(same)) == _rows(list(same))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("length", [None, 70])
def test_resume_is_exact_with_transform_generators(dirs: tuple[Path, Path], workers: int, length: int | None) -> None:
    def make() -> StreamingDataLoader:
        parallel = ParallelStreamingDataset(_datasets(dirs, shuffle=True), length=length, transform=_mix, seed=3)
        return StreamingDataLoader(parallel, batch_size=4, num_workers=workers)

    loader = make()
    full = [_rows(list(loader)) for _ in range(3)]
    loader = make()
    list(loader)
    seen = _rows(_take(loader, 3))
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert seen + _rows(list(resumed)) == full[1]
    assert _rows(list(resumed)) == full[2]  # the next epoch starts where the resumed one ended
    assert full[0] != full[1]


def test_resume_with_another_worker_count(dirs: tuple[Path, Path]) -> None:
    def make(workers: int) -> StreamingDataLoader:
        parallel = ParallelStreamingDataset(_datasets(dirs, shuffle=True), length=50, transform=_mix)
        return StreamingDataLoader(parallel, batch_size=4, num_workers=workers)

    reference = sorted(_rows(list(make(0))))
    loader = make(2)
    seen = _rows(_take(loader, 5))
    resumed = make(3)
    resumed.load_state_dict(loader.state_dict())
    # The generators are seeded by position, so even the transformed values are the same.
    assert sorted(seen + _rows(list(resumed))) == reference


@pytest.mark.parametrize("workers", [0, 2])
def test_endless_resume_is_exact(dirs: tuple[Path, Path], workers: int) -> None:
    def make(num_workers: int = workers) -> StreamingDataLoader:
        parallel = ParallelStreamingDataset(_datasets(dirs, True), length=float("inf"), transform=_mix)
        return StreamingDataLoader(parallel, batch_size=3, num_workers=num_workers)

    full = _rows(_take(make(), 20))
    loader = make()
    seen = _rows(_take(loader, 7))
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert seen + _rows(_take(resumed, 13)) == full
    with pytest.raises(ValueError, match="resumes only with the topology it was recorded with"):
        make(workers + 2).load_state_dict(state)


def test_generators_are_seeded_per_position(dirs: tuple[Path, Path]) -> None:
    def rows(seed: int, reset_rngs: bool = False) -> list[list[tuple[float, ...]]]:
        parallel = ParallelStreamingDataset(
            _datasets(dirs), length=10, transform=_mix, seed=seed, resume=False, reset_rngs=reset_rngs
        )
        loader = StreamingDataLoader(parallel, batch_size=5)
        return [_rows(list(loader)) for _ in range(2)]

    first, second = rows(1)
    assert [r[3:] for r in first] == [r[3:] for r in second]  # resume=False: the same samples every epoch
    assert first != second  # ... transformed with other random numbers
    assert rows(1) == [first, second] and rows(2)[0] != first
    reset = rows(1, reset_rngs=True)
    assert reset[0] == reset[1]
    values = np.array([r[1] for r in first])
    assert len(set(values.tolist())) == len(values)


def test_bad_input(dirs: tuple[Path, Path]) -> None:
    datasets = _datasets(dirs)
    with pytest.raises(ValueError, match="length must be None"):
        ParallelStreamingDataset(datasets, length=2.5)
    with pytest.raises(ValueError, match="1 or 2 arguments"):
        ParallelStreamingDataset(datasets, transform=lambda a, b, c: a)
    with pytest.raises(TypeError, match="not a StreamingDataset"):
        ParallelStreamingDataset([datasets[0], "data"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"cannot cycle empty datasets \(datasets\[1\]"):
        ParallelStreamingDataset([datasets[0], datasets[1].subset([])], length=10)

    loader = StreamingDataLoader(ParallelStreamingDataset(datasets, length=20), batch_size=4)
    _take(loader, 2)
    state = loader.state_dict()
    with pytest.raises(ValueError, match="recorded on a ParallelStreamingDataset, not on a CombinedStreamingDataset"):
        StreamingDataLoader(CombinedStreamingDataset(_datasets(dirs)), batch_size=4).load_state_dict(state)
    with pytest.raises(ValueError, match="length=20"):
        StreamingDataLoader(ParallelStreamingDataset(_datasets(dirs), length=30), batch_size=4).load_state_dict(state)
    with pytest.raises(ValueError, match=r"datasets\[1\]: the state dict was recorded on a dataset of 25 samples"):
        swapped = ParallelStreamingDataset(_datasets((dirs[0], dirs[0])), length=20)
        StreamingDataLoader(swapped, batch_size=4).load_state_dict(state)


def test_persistent_workers_continue_the_cycle(dirs: tuple[Path, Path]) -> None:
    def make(**kwargs: Any) -> StreamingDataLoader:
        parallel = ParallelStreamingDataset(_datasets(dirs, shuffle=True), length=30, transform=_mix)
        return StreamingDataLoader(parallel, batch_size=4, num_workers=2, **kwargs)

    plain = make()
    persistent = make(persistent_workers=True)
    assert [_rows(list(persistent)) for _ in range(3)] == [_rows(list(plain)) for _ in range(3)]


def _add(samples: tuple[Any, ...]) -> Any:
    return samples[0] + samples[1]


def _pairs(path: Path, n: int, offset: int, names: bool) -> Path:
    writer = BinaryWriter(path, chunk_size=7)
    for i in range(n):
        sample: dict[str, Any] = {"x": np.full(3, offset + i, dtype=np.float32), "id": offset + i}
        writer.add_item(i, {**sample, "name": f"s{offset + i}"} if names else sample)
    writer.done()
    writer.merge()
    return path


@pytest.mark.parametrize(
    ("workers", "length", "drop_last", "transform"),
    [(0, None, False, None), (2, None, False, None), (2, None, True, None), (2, 50, False, None),
     (2, 50, False, _add), (0, 37, True, _add), (2, float("inf"), False, None)],
)  # fmt: skip
def test_batches_made_in_the_workers_are_torchs(
    tmp_path: Path, workers: int, length: Any, drop_last: bool, transform: Any
) -> None:
    """The loader batches the tuples in its workers (gathered as arrays without a transform, read
    one by one where a string leaf is not gathered); the batches are exactly those torch makes
    from the same tuples sample by sample."""
    names = drop_last  # some cases with a string leaf
    a, b = _pairs(tmp_path / "a", 40, 0, names), _pairs(tmp_path / "b", 29, 1000, names)

    def dataset() -> ParallelStreamingDataset:
        subs = [StreamingDataset(str(a), shuffle=True, seed=1), StreamingDataset(str(b), shuffle=True, seed=2)]
        if transform is not None:
            return ParallelStreamingDataset(subs, length=length, transform=lambda s: {"x": s[0]["x"] + s[1]["x"]})
        return ParallelStreamingDataset(subs, length=length)

    batches = 12 if length == float("inf") else None
    ours = StreamingDataLoader(dataset(), batch_size=4, num_workers=workers, drop_last=drop_last)
    assert ours._batches_in_dataset
    plain = dataset()
    plain.set_batch_size(4)
    plain.set_num_workers(workers)
    plain.set_drop_last(drop_last)
    torchs = torch.utils.data.DataLoader(plain, batch_size=4, num_workers=workers, drop_last=drop_last,
                                         collate_fn=litdata_collate)  # fmt: skip
    for _ in range(2):  # two epochs (cycling continues in the second)
        got, expected = _take(ours, batches or 10**9), _take(torchs, batches or 10**9)
        assert len(got) == len(expected) > 0
        for mine, theirs in zip(got, expected):
            assert _same(mine, theirs)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    return a == b
