"""Who processes what: this node's share of the inputs, split over its workers.

Inputs are numbered once (their position after ``batch_size`` grouping and the reader's remapping)
and the numbers travel with them, so errors can name the input and checkpoints where a worker stopped.

- Static ordered slices: ``num_nodes * num_workers`` contiguous slices, worker ``w`` of node ``n``
  taking slice ``n * num_workers + w``, so the workers' chunks in rank order hold the samples in
  input order. Equal counts (the remainder to the last workers, like upstream), or equal shares of
  the weights; with ``align_chunking`` every slice but the last holds whole chunks.
- The shared queue: ``num_nodes`` slices; each node's goes through one queue its workers pull from.
"""

from __future__ import annotations

import bisect
import itertools
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, overload

from litdata_format.internal import tree_flatten

__all__ = [
    "InputStream",
    "Numbered",
    "batched",
    "contiguous_bins",
    "file_sizes",
    "limit_for_dev_run",
    "node_share",
    "worker_slices",
]


class Numbered(Sequence[tuple[int, Any]]):
    """Inputs and their positions in the user's sequence: a sequence of ``(position, input)``.

    Kept as two parallel sequences, the positions a ``range`` when contiguous, so a share of 200k inputs
    costs no 200k pairs to build and pickle for the workers. Slices are ``Numbered`` too.
    """

    __slots__ = ("positions", "values")

    def __init__(self, positions: Sequence[int], values: Sequence[Any]) -> None:
        if len(positions) != len(values):
            raise ValueError(f"{len(positions)} positions for {len(values)} inputs")
        self.positions = positions
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> tuple[int, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Numbered: ...
    def __getitem__(self, index: int | slice) -> tuple[int, Any] | Numbered:
        if isinstance(index, slice):
            return Numbered(self.positions[index], self.values[index])
        return self.positions[index], self.values[index]

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        return zip(self.positions, self.values)

    def __reduce__(self) -> tuple[type[Numbered], tuple[Sequence[int], Sequence[Any]]]:
        return Numbered, (self.positions, self.values)

    def __repr__(self) -> str:
        return f"Numbered({self.positions!r}, {len(self)} inputs)"


def batched(inputs: Sequence[Any], batch_size: int | None) -> list[Any]:
    """``inputs`` as a list, grouped into lists of ``batch_size`` when it is more than 1."""
    items = list(inputs)
    if batch_size is None or batch_size <= 1:
        return items
    return [items[pos : pos + batch_size] for pos in range(0, len(items), batch_size)]


class InputStream:
    """Inputs given as an iterator (a generator): numbered as they arrive and never held whole.

    The parent's feeder pulls them for the node's shared queue one batch at a time, so the parent holds
    only the batches in flight. One pass only; ``limit`` (``fast_dev_run``) takes at most that many.
    """

    def __init__(self, source: Iterator[Any], batch_size: int | None = None, limit: int | None = None) -> None:
        self.source = source
        self.batch_size = batch_size if batch_size is not None and batch_size > 1 else None
        self.limit = limit

    def limited(self, limit: int | None) -> InputStream:
        """This stream cut to its first ``limit`` inputs (None: all)."""
        if limit is None:
            return self
        return InputStream(self.source, self.batch_size, limit if self.limit is None else min(limit, self.limit))

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        items: Iterator[Any] = self.source
        if self.batch_size is not None:
            source, size = items, self.batch_size
            items = iter(lambda: list(itertools.islice(source, size)), [])
        if self.limit is not None:
            items = itertools.islice(items, self.limit)
        return enumerate(items)

    def __repr__(self) -> str:
        return f"InputStream({self.source!r})"


def contiguous_bins(
    count: int, num_bins: int, align: int | None = None, weights: Sequence[float] | None = None
) -> list[range]:
    """Split ``range(count)`` into ``num_bins`` contiguous ranges.

    Without ``align`` or ``weights`` the sizes differ by at most one, the larger ranges last. With ``align``
    every range but the last holds a multiple of ``align`` items. With ``weights`` (one per item) each
    range ends where its running total comes closest to an equal share of the whole weight.
    """
    if weights is not None:
        prefix = list(itertools.accumulate(weights))
        total = prefix[-1] if prefix else 0
        stops = []
        for b in range(1, num_bins):
            share = total * b / num_bins
            i = bisect.bisect_left(prefix, share)  # items [0, i] reach the share
            reached_before = prefix[i - 1] if i else 0
            stop = i + 1 if i < count and prefix[i] - share <= share - reached_before else i
            stops.append(max(stop, stops[-1] if stops else 0))
        sizes = [stop - start for start, stop in zip([0, *stops], [*stops, count])]
    elif align is not None:
        per_bin = (count // align) // num_bins * align
        if per_bin == 0 and count > align:
            warnings.warn(
                f"align_chunking: chunk_size={align} is too large for {count} inputs over {num_bins} workers; "
                "the last worker takes all of them",
                UserWarning,
                stacklevel=3,
            )
        sizes = [per_bin] * (num_bins - 1) + [count - per_bin * (num_bins - 1)]
    else:
        base, extra = divmod(count, num_bins)
        sizes = [base + (1 if b >= num_bins - extra else 0) for b in range(num_bins)]
    return [range(stop - size, stop) for size, stop in zip(sizes, itertools.accumulate(sizes))]


def file_sizes(items: Sequence[Any], input_dir: str) -> list[int]:
    """For each input, the total size of the local files under ``input_dir`` it names (at least 1)."""
    root = os.path.abspath(input_dir)
    sizes = []
    for item in items:
        leaves, _ = tree_flatten(item)
        files = [x for x in leaves if isinstance(x, str) and os.path.abspath(x).startswith(root) and os.path.isfile(x)]
        sizes.append(max(sum(map(os.path.getsize, files)), 1))
    return sizes


def _bins(
    items: Sequence[Any],
    num_bins: int,
    weights: Sequence[float] | None,
    align: int | None,
) -> list[Numbered]:
    # A bin of all the inputs is the inputs themselves: one node's shared queue copies nothing.
    return [
        Numbered(r, items if len(r) == len(items) else items[r.start : r.stop])
        for r in contiguous_bins(len(items), num_bins, align, weights)
    ]


def worker_slices(
    items: Sequence[Any],
    num_workers: int,
    num_nodes: int = 1,
    node_rank: int = 0,
    weights: Sequence[float] | None = None,
    align: int | None = None,
) -> list[Numbered]:
    """The static, contiguous slices of this node's workers, in input order."""
    return _bins(items, num_nodes * num_workers, weights, align)[
        node_rank * num_workers : (node_rank + 1) * num_workers
    ]


def node_share(
    items: Sequence[Any],
    num_nodes: int = 1,
    node_rank: int = 0,
    weights: Sequence[float] | None = None,
) -> Numbered:
    """This node's inputs, for its workers' shared queue."""
    return _bins(items, num_nodes, weights, None)[node_rank]


def limit_for_dev_run(fast_dev_run: bool | int) -> int | None:
    """How many inputs per worker ``fast_dev_run`` keeps (None = all)."""
    if fast_dev_run is True:
        return 10  # upstream's number
    if fast_dev_run is False or fast_dev_run is None:
        return None
    if not isinstance(fast_dev_run, int) or fast_dev_run < 1:
        raise ValueError(f"fast_dev_run must be a bool or a positive int, got {fast_dev_run!r}")
    return fast_dev_run
