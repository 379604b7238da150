"""``litdata_collate``, and :class:`Batching`: the one owner of a batch's form across the worker boundary.

When a StreamingDataLoader's datasets make the batches in its workers, :class:`Batching` decides how
gathered parts are joined, whether a batch leaves a worker as numpy arrays (:class:`ArrayBatch`), how
many batches go in one message (:class:`BatchBundle`), and how the loader turns what it receives back
into the batches torch would have delivered one at a time.
"""

from __future__ import annotations

import itertools
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from litdata_format import Graph
from litdata_format.internal import is_pyg_data
from litdata_io.internal import probe

__all__ = [
    "ArrayBatch",
    "BatchBundle",
    "Batching",
    "CollateError",
    "CollatedInDataset",
    "as_tensors",
    "bundle_size",
    "litdata_collate",
]


def litdata_collate(batch: Sequence[Any]) -> Any:
    """Collate a list of samples into a batch.

    Graph leaves (PyG ``Data`` / ``HeteroData``) are joined with ``Batch.from_data_list``; a
    ``Graph`` returned without PyG installed stays a list. Dicts, tuples and lists are collated
    key by key, so a graph can sit next to ordinary tensors in one sample.

    Args:
        batch: The samples of one batch, as the dataset yielded them.

    Returns:
        The batch: each leaf's values stacked into one tensor along a new first dimension (graphs as
        above; PIL images, which torch's ``default_collate`` refuses, stay a list).

    Raises:
        CollateError: a field torch cannot batch (None, a datetime, bytes, arrays of other shapes, a
            key a sample lacks): the message names the field, the sample of the batch and what to do.
    """
    return _collate(batch, "")


class CollateError(TypeError, RuntimeError):
    """A batch torch cannot collate, naming the field and the sample (a TypeError, as torch's, or a RuntimeError)."""


def _collate(batch: Sequence[Any], path: str) -> Any:
    first = batch[0]
    if isinstance(first, Graph):  # returned without PyG installed: nothing to batch them with
        return list(batch)
    if _is_pil_image(first):  # an MDS ``pil``/``jpeg`` column, an ``Image`` decoded to PIL: no tensor form to pick
        return list(batch)
    if is_pyg_data(first):
        from torch_geometric.data import Batch

        return Batch.from_data_list(list(batch))
    # Same-shape numeric arrays: one stack (default_collate makes a tensor per sample first).
    if (
        isinstance(first, np.ndarray)
        and first.dtype.kind in "biufc"
        and all(isinstance(x, np.ndarray) and x.shape == first.shape and x.dtype == first.dtype for x in batch)
    ):
        return torch.from_numpy(np.stack(batch))
    if isinstance(first, Mapping):
        try:
            return {key: _collate(_column(batch, key, path), f"{path}[{key!r}]") for key in first}
        except CollateError as err:
            if set(first) != {"bytes", "path"}:
                raise
            raise CollateError(_encoded_struct(path)) from err
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        fields: tuple[str, ...] = first._fields  # pyright: ignore[reportAttributeAccessIssue]
        return type(first)(*(_collate(list(group), f"{path}.{name}") for name, group in zip(fields, zip(*batch))))
    if isinstance(first, (tuple, list)) and not isinstance(first, str):
        return [_collate(list(group), f"{path}[{i}]") for i, group in enumerate(zip(*batch))]
    try:
        return default_collate(list(batch))
    except (TypeError, RuntimeError, ValueError) as err:
        raise CollateError(_why_not(batch, path, err)) from err


def _column(batch: Sequence[Any], key: Any, path: str) -> list[Any]:
    """Every sample's ``key``: a sample without it is named."""
    try:
        return [sample[key] for sample in batch]
    except (KeyError, TypeError):
        lacking = next(i for i, sample in enumerate(batch) if not isinstance(sample, Mapping) or key not in sample)
        raise CollateError(
            f"cannot collate sample{path}[{key!r}]: sample {lacking} of the batch has no {key!r} where sample 0 "
            f"has one. Give every sample the same keys in a transform, {_OWN} handles it"
        ) from None


_OWN = "or pass the loader a collate_fn that"


def _why_not(batch: Sequence[Any], path: str, err: Exception) -> str:
    """Why the values at ``path`` do not collate, naming the sample of the batch, and what to do."""
    where = f"cannot collate sample{path}" if path else "cannot collate the samples"
    for i, value in enumerate(batch):
        if value is None:
            return (
                f"{where}: sample {i} of the batch holds None there. Give every sample a value in a transform "
                f"(e.g. a default), {_OWN} handles None"
            )
    first = batch[0]
    for i, value in enumerate(batch):
        shape, expected = getattr(value, "shape", None), getattr(first, "shape", None)
        if shape is not None and expected is not None and tuple(shape) != tuple(expected):
            return (
                f"{where}: sample {i} of the batch has shape {tuple(shape)} where sample 0 has {tuple(expected)}. "
                f"Pad or crop them to one shape in a transform, {_OWN} pads them (e.g. with "
                "torch.nn.utils.rnn.pad_sequence)"
            )
    kinds = " and ".join(sorted({type(value).__name__ for value in batch}))
    return (
        f"{where}: torch cannot batch {kinds} values. Convert them in a transform (to a number, a str or an "
        f"array), {_OWN} handles them ({err})"
    )


def _encoded_struct(path: str) -> str:
    """What to do with a Hugging Face ``Image()`` / ``Audio()`` value: encoded bytes and a path."""
    return (
        f"cannot collate sample{path}: it is a Hugging Face Image() or Audio() struct ({{'bytes', 'path'}}), "
        f"encoded data torch cannot batch. Decode it in a transform, e.g. "
        f"PIL.Image.open(io.BytesIO(sample{path}['bytes'])) and then an array, {_OWN} does"
    )


def _is_pil_image(value: object) -> bool:
    pil = sys.modules.get("PIL.Image")  # a PIL image exists only if Pillow is imported already
    return pil is not None and isinstance(value, pil.Image)


@dataclass(frozen=True)
class Batching:
    """How a dataset groups its samples when it yields whole batches (see ``StreamingDataLoader``)."""

    batch_size: int
    collate: Callable[[list[Any]], Any]
    drop_last: bool
    # Workers may send gathered batches as numpy arrays (see ArrayBatch); not when the loader pins
    # memory, which torch does to tensors only, before the loader would see them.
    arrays: bool = True
    # Batches a worker sends per message (see BatchBundle); the same for every worker of the loader.
    bundle: int = 1

    @classmethod
    def for_pass(
        cls,
        batch_size: int,
        collate: Callable[[list[Any]], Any],
        drop_last: bool,
        *,
        workers: int,
        pin_memory: bool,
        sample_bytes: float | None,
        endless: bool,
    ) -> Batching:
        """How a loader's workers make and send the batches of a pass.

        No arrays when the loader pins memory (torch pins tensors only); no bundles in an endless pass
        (no count to take them out by) or when ``sample_bytes`` is None (batches not gathered).
        """
        arrays = not pin_memory
        bundle = 1
        if workers and arrays and not endless and sample_bytes is not None:
            bundle = bundle_size(sample_bytes * batch_size)
        return cls(batch_size, collate, drop_last, arrays, bundle)

    # -- in the worker ----------------------------------------------------------------------------
    def of_parts(self, parts: list[Any]) -> Any:
        """One batch of gathered ``parts``: joined as arrays, or else their samples collated alike."""
        batch = concat_batches(parts)
        if batch is None:  # some samples had to be read one by one: collate them all alike
            return self.collate([sample for part in parts for sample in unbatch(part)])
        return self.leaving(batch)

    def leaving(self, batch: Any) -> Any:
        """A gathered batch as it leaves the dataset: numpy arrays from a worker (:class:`ArrayBatch`) or tensors."""
        if self.arrays and get_worker_info() is not None:
            return ArrayBatch.of(batch)
        return as_tensors(batch)

    def sent(self, batches: Iterator[Any], worker: int) -> Iterator[Any]:
        """``batches`` as a worker sends them: each one a ``worker_batch`` event, bundled (see BatchBundle)."""
        batches = _noting(batches, worker)
        if self.bundle > 1 and get_worker_info() is not None:
            while bundle := list(itertools.islice(batches, self.bundle)):
                yield BatchBundle(worker, bundle)
        else:
            yield from batches

    # -- in the loader ----------------------------------------------------------------------------
    def received(self, messages: Iterator[Any], worker_batches: Sequence[int] | None) -> Iterator[Any]:
        """The batches of the workers' messages, as torch would have delivered them one at a time.

        ``worker_batches``: each worker's number of batches in the pass (needed when they are bundled).
        """
        if self.bundle > 1 and worker_batches is not None:
            messages = _unbundled(messages, list(worker_batches))
        for batch in messages:
            yield as_tensors(batch.data) if type(batch) is ArrayBatch else batch


class BatchBundle(NamedTuple):
    """Consecutive batches of one DataLoader worker, sent as one message.

    For small gathered batches the per-message bookkeeping of torch's worker queues costs more than
    the batch itself. The loader takes them out in the order torch would have delivered them.
    """

    worker: int
    batches: list[Any]


BUNDLE_BYTES = 512 << 10  # per message: bigger ones measured slower (cache misses in the copies)
MAX_BUNDLE = 8


def bundle_size(batch_bytes: float) -> int:
    """Batches per message for batches of about ``batch_bytes`` (1: no bundling)."""
    if batch_bytes <= 0:
        return MAX_BUNDLE
    return max(1, min(MAX_BUNDLE, int(BUNDLE_BYTES // batch_bytes)))


class ArrayBatch:
    """A gathered batch a worker sends as numpy arrays; the loader makes tensors of it.

    A small batch pickled through the worker's pipe costs far less than torch's shared-memory
    tensors (a file descriptor per tensor over a new socket). Big batches still go through shared memory.
    """

    LIMIT = 1 << 20  # bytes; above this, copying through the pipe costs more than sharing memory

    def __init__(self, data: Any) -> None:
        self.data = data

    @classmethod
    def of(cls, batch: Any) -> Any:
        """``batch`` wrapped if it is small enough to travel as arrays, else as tensors."""
        if _array_bytes(batch) <= cls.LIMIT:
            return cls(batch)
        return as_tensors(batch)


class CollatedInDataset:
    """The ``collate_fn`` torch sees when the dataset yields batches already collated with ``collate``."""

    def __init__(self, collate: Callable[[list[Any]], Any]) -> None:
        self.collate = collate

    def __call__(self, batch: Any) -> Any:
        return batch


def as_tensors(batch: Any) -> Any:
    """A batch of numpy arrays (a leaf, a dict of leaves, or a list of such) as tensors sharing their memory."""
    if isinstance(batch, np.ndarray):
        return torch.from_numpy(batch)
    if isinstance(batch, Mapping):
        return {key: as_tensors(value) for key, value in batch.items()}
    if type(batch) is list:
        return [as_tensors(part) for part in batch]
    return batch


def _array_bytes(batch: Any) -> int:
    if isinstance(batch, np.ndarray):
        return batch.nbytes
    if isinstance(batch, Mapping):
        return sum(_array_bytes(value) for value in batch.values())
    if type(batch) is list:
        return sum(_array_bytes(part) for part in batch)
    return 0


def concat_batches(parts: Sequence[Any]) -> Any:
    """Gathered parts of one batch joined along the first dimension, or ``None`` if they differ in kind.

    Parts differ in kind when one is a list of samples, or they have other keys, dtypes or shapes.
    """
    first = parts[0]
    if isinstance(first, dict):
        return _by_key(parts, concat_batches)
    if not isinstance(first, (np.ndarray, torch.Tensor)) or not all(_joinable(p, first) for p in parts):
        return None
    if len(parts) == 1:
        return first
    return torch.cat(list(parts)) if isinstance(first, torch.Tensor) else np.concatenate(parts)


def interleave(picks: np.ndarray, shares: Mapping[int, Any]) -> Any:
    """One batch made of ``shares`` with each sample where ``picks`` drew it, or ``None``.

    ``shares`` holds, for each source ``d``, a gathered batch of its samples in order. ``None`` when the
    shares are not arrays alike (a share that is not arrays, other keys, dtypes or shapes).
    """
    if any(share is None for share in shares.values()):
        return None
    if len(shares) == 1:
        return next(iter(shares.values()))
    masks = [picks == d for d in shares]

    def merged(parts: Sequence[Any]) -> Any:  # in the order of ``shares``
        first = parts[0]
        if isinstance(first, dict):
            return _by_key(parts, merged)
        if not isinstance(first, np.ndarray) or not all(
            isinstance(p, np.ndarray) and _joinable(p, first) for p in parts
        ):
            return None
        out = np.empty((len(picks), *first.shape[1:]), dtype=first.dtype)
        for mask, part in zip(masks, parts):
            out[mask] = part
        return out

    return merged(list(shares.values()))


def _by_key(parts: Sequence[Any], join: Callable[[list[Any]], Any]) -> dict[Any, Any] | None:
    """Dicts with the same keys joined key by key with ``join``; None unless every key joins."""
    first = parts[0]
    if not all(isinstance(p, dict) and p.keys() == first.keys() for p in parts):
        return None
    joined = {k: join([p[k] for p in parts]) for k in first}
    return None if any(v is None for v in joined.values()) else joined


def _joinable(part: Any, first: np.ndarray | torch.Tensor) -> bool:
    return type(part) is type(first) and part.dtype == first.dtype and part.shape[1:] == first.shape[1:]


def unbatch(part: Any) -> list[Any]:
    """The samples of a gathered part (a list of samples stays as it is)."""
    if isinstance(part, list):
        return part
    if isinstance(part, (np.ndarray, torch.Tensor)):
        return list(part)
    keys = list(part)
    return [dict(zip(keys, values)) for values in zip(*(part[k] for k in keys))]


def _noting(batches: Iterator[Any], worker: int) -> Iterator[Any]:
    for batch in batches:
        probe.instant("worker_batch", "batch", worker=worker)
        yield batch


def _unbundled(received: Iterator[Any], counts: list[int]) -> Iterator[Any]:
    """The batches of the workers' :class:`BatchBundle` messages, in the order torch delivers single batches.

    That is round-robin over the workers that still have some; ``counts`` is each worker's number of batches.
    """
    waiting: list[deque[Any]] = [deque() for _ in counts]
    left = list(counts)
    while any(left):
        for worker in range(len(left)):
            if not left[worker]:
                continue
            while not waiting[worker]:
                bundle = next(received, None)
                if bundle is None:
                    raise RuntimeError(
                        f"DataLoader worker {worker} stopped {left[worker]} batches before the end of its share "
                        "of the epoch; please report this with the dataset's index.json and the loader's options"
                    )
                assert type(bundle) is BatchBundle, f"expected a BatchBundle from the workers, got {type(bundle)}"
                waiting[bundle.worker].extend(bundle.batches)
            left[worker] -= 1
            yield waiting[worker].popleft()
    extra = sum(len(bundle.batches) for bundle in received) + sum(map(len, waiting))
    if extra:
        raise RuntimeError(
            f"the DataLoader workers sent {extra} batches more than their share of the epoch; please report this "
            "with the dataset's index.json and the loader's options"
        )
