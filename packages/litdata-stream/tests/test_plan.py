from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from litdata_stream._pass_plan import (
    EpochOrder,
    Topology,
    WorkerPlan,
    batch_count,
    consumed_per_worker,
    remaining_base,
    split_base,
)


def _deliver(plans: list[WorkerPlan], batch: int, drop_last: bool, first: int = 0) -> list[tuple[int, list[int]]]:
    """What a torch DataLoader yields: round-robin batches over workers, finished workers drop out."""
    queues = []
    for plan in plans:
        positions = [p for start, end in plan.intervals for p in range(start, end)]
        batches = [positions[i : i + batch] for i in range(0, len(positions), batch)]
        if drop_last and batches and len(batches[-1]) < batch:
            batches.pop()
        queues.append(batches)
    out = []
    order = list(range(first, len(plans))) + list(range(first))
    while any(queues[w] for w in order):
        for w in order:
            if queues[w]:
                out.append((w, queues[w].pop(0)))
    return out


def test_epoch_order_is_a_permutation_that_changes_with_epoch() -> None:
    lengths = [5, 3, 8, 1]
    first = EpochOrder(lengths, seed=42, epoch=1, shuffle=True)
    second = EpochOrder(lengths, seed=42, epoch=2, shuffle=True)
    again = EpochOrder(lengths, seed=42, epoch=1, shuffle=True)

    def flat(order: EpochOrder) -> list[tuple[int, int]]:
        return [(p.chunk, int(i)) for p in order.pieces([(0, len(order))]) for i in order.within(p.chunk)[p.lo : p.hi]]

    assert sorted(flat(first)) == sorted((c, i) for c, n in enumerate(lengths) for i in range(n))
    assert flat(first) == flat(again)
    assert flat(first) != flat(second)
    plain = EpochOrder(lengths, seed=42, epoch=1, shuffle=False)
    assert flat(plain) == [(c, i) for c, n in enumerate(lengths) for i in range(n)]


def test_pieces_follow_chunk_boundaries() -> None:
    order = EpochOrder([4, 4, 4], seed=0, epoch=1, shuffle=False)
    pieces = order.pieces([(2, 9)])
    assert [(p.chunk, p.lo, p.hi) for p in pieces] == [(0, 2, 4), (1, 0, 4), (2, 0, 1)]


@pytest.mark.parametrize(
    ("total", "world", "workers", "batch", "drop_last"),
    [(100, 1, 1, 10, False), (103, 1, 3, 10, False), (103, 2, 3, 4, True), (7, 4, 2, 3, True), (1000, 3, 2, 16, True)],
)
def test_split_covers_without_overlap_and_balances_ranks(
    total: int, world: int, workers: int, batch: int, drop_last: bool
) -> None:
    topo = Topology(world, workers, batch, drop_last)
    plans = split_base([(0, total)], topo)
    positions = [p for rank in plans for plan in rank for s, e in plan.intervals for p in range(s, e)]
    assert len(positions) == len(set(positions))
    batches_per_rank = [sum(batch_count(p.num_samples, batch, drop_last) for p in rank) for rank in plans]
    if drop_last:
        assert len(set(batches_per_rank)) == 1
        assert len(positions) == (total // (batch * world)) * batch * world
        assert all(plan.num_samples % batch == 0 for rank in plans for plan in rank)
    else:
        assert sorted(positions) == list(range(total))
        if world == 1:
            assert batches_per_rank == [-(-total // batch)]


@pytest.mark.parametrize("seed", range(25))
def test_interrupt_and_resume_any_topology(seed: int) -> None:
    rng = random.Random(seed)
    total = rng.randint(1, 300)
    batch = rng.randint(1, 9)
    drop_last = rng.random() < 0.5
    before = Topology(rng.randint(1, 3), rng.randint(1, 4), batch, drop_last)
    plans = split_base([(0, total)], before)
    delivered = [_deliver(rank, batch, drop_last) for rank in plans]
    count = len(delivered[0])
    stop = rng.randint(0, count)
    if drop_last:
        assert all(len(d) == count for d in delivered)
    else:
        stop = min(stop, *(len(d) for d in delivered))
    seen_before = [p for d in delivered for _, b in d[:stop] for p in b]
    consumed = []
    for rank in plans:
        samples, _ = consumed_per_worker(rank, batch, drop_last, stop)
        consumed.append(samples)
    base = remaining_base(plans, consumed)
    assigned = {p for rank in plans for plan in rank for s, e in plan.intervals for p in range(s, e)}
    left = [p for s, e in base for p in range(s, e)]
    assert sorted(seen_before + left) == sorted(assigned)
    # Resume with another topology: nothing repeated.
    after = Topology(rng.randint(1, 3), rng.randint(1, 4), batch, drop_last)
    new_plans = split_base(base, after)
    seen_after = [p for rank in new_plans for _, b in _deliver(rank, batch, drop_last) for p in b]
    assert not set(seen_after) & set(seen_before)
    assert len(seen_after) == len(set(seen_after))
    if not drop_last:
        assert sorted(seen_before + seen_after) == sorted(assigned)


@pytest.mark.parametrize(("workers", "counts"), [(3, [37, 40, 31]), (2, [8, 8]), (4, [5, 0, 12, 3])])
def test_same_topology_resume_keeps_order(workers: int, counts: list[int]) -> None:
    batch = 4
    plans, offset = [], 0
    for n in counts[:workers]:
        plans.append(WorkerPlan(((offset, offset + n),)))
        offset += n
    full = _deliver(plans, batch, False)
    for stop in range(len(full) + 1):
        samples, next_worker = consumed_per_worker(plans, batch, False, stop)
        rest = [
            WorkerPlan(((plan.intervals[0][0] + done, plan.intervals[0][1]),)) if plan.intervals else plan
            for plan, done in zip(plans, samples)
        ]
        resumed = _deliver(rest, batch, False, first=next_worker)
        assert [b for _, b in resumed] == [b for _, b in full[stop:]]


def test_consumed_matches_simulation_exhaustively() -> None:
    for counts in itertools.product([0, 1, 5, 8], repeat=3):
        plans, offset = [], 0
        for n in counts:
            plans.append(WorkerPlan(((offset, offset + n),) if n else ()))
            offset += n
        full = _deliver(plans, 2, False)
        for stop in range(len(full) + 1):
            samples, _ = consumed_per_worker(plans, 2, False, stop)
            expected = [0, 0, 0]
            for w, b in full[:stop]:
                expected[w] += len(b)
            assert samples == expected, (counts, stop)


def test_too_many_batches() -> None:
    with pytest.raises(ValueError, match="batches were delivered"):
        consumed_per_worker([WorkerPlan(((0, 4),))], 2, False, 3)


def test_np_lengths_accepted() -> None:
    assert len(EpochOrder(np.array([2, 3]), 1, 1, True)) == 5


def test_the_in_chunk_orders_computed_at_once_are_those_of_each_chunk() -> None:
    import pickle

    from litdata_stream._pass_plan import hashed_permutation

    for lengths in ([4] * 300 + [3, 1], [64] * 20, [300, 2], [1] * 5):
        order = EpochOrder(lengths, 42, 3, shuffle=True)
        for chunk, length in enumerate(lengths):
            got = order.within(chunk)
            assert np.array_equal(got, hashed_permutation(length, 42, 3, len(lengths), chunk)), (lengths[:2], chunk)
        assert pickle.loads(pickle.dumps(order)).within(0).tolist() == order.within(0).tolist()
