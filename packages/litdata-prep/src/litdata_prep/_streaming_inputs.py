"""An optimized dataset as the inputs of ``optimize`` / ``map``: re-chunk, re-compress or filter it.

``inputs=StreamingDataset(...)`` gives ``fn`` each sample, ``inputs=StreamingDataLoader(...)`` each
batch (as upstream does): the positions ``0..n-1`` read by a :class:`StreamingInputReader` in the
workers, so the work is split, ordered and checkpointed like any list of inputs. Its classes are
looked up in ``sys.modules``: a dataset given as inputs means ``litdata_stream`` is imported already.
"""

from __future__ import annotations

import sys
from typing import Any

from litdata_prep._readers import BaseReader

__all__ = ["StreamingInputReader", "streaming_inputs"]


def streaming_inputs(what: str, inputs: Any, batch_size: int | None, reader: Any,
                     weights: Any) -> tuple[Any, Any]:  # fmt: skip
    """``(inputs, reader)`` to run with: a StreamingDataset's or StreamingDataLoader's positions and reader."""
    stream = sys.modules.get("litdata_stream")
    mixed = (stream.CombinedStreamingDataset, stream.ParallelStreamingDataset) if stream is not None else ()
    if stream is None or not isinstance(inputs, (stream.StreamingDataLoader, stream.StreamingDataset, *mixed)):
        return inputs, reader
    name = type(inputs).__name__
    if isinstance(inputs, mixed):
        raise ValueError(
            f"{what}: inputs={name} is not supported: give each StreamingDataset in turn (mode='append' adds to "
            "the output), or a StreamingDataLoader over one StreamingDataset"
        )
    for option, value in (("batch_size", batch_size), ("reader", reader), ("weights", weights)):
        if value is not None:
            raise ValueError(
                f"{what}: {option} cannot be combined with inputs={name}"
                + (": the loader's own batch_size makes the batches fn receives" if option == "batch_size" else "")
            )
    if isinstance(inputs, stream.StreamingDataset):
        source = StreamingInputReader(inputs)
    elif isinstance(inputs.dataset, stream.StreamingDataset):
        source = StreamingInputReader(inputs.dataset, inputs.batch_size, inputs.user_collate_fn, inputs.drop_last)
    else:
        raise ValueError(
            f"{what}: inputs=StreamingDataLoader over a {type(inputs.dataset).__name__} is not supported: the loader "
            "must read one StreamingDataset"
        )
    if source.count == 0:
        raise ValueError(f"{what}: inputs={name} is empty; there is nothing to process")
    return range(source.count), source


class StreamingInputReader(BaseReader):
    """Reads sample ``i`` of a StreamingDataset, or batch ``i`` (``collate``-d) for a loader's batches.

    The samples are taken in the dataset's stored order (its ``shuffle`` is not applied), and with
    its ``transform``.
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, collate: Any = None,
                 drop_last: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.dataset = dataset
        self.batch_size = batch_size
        self.collate = collate
        self.samples = dataset.num_samples
        full, rest = divmod(self.samples, batch_size or 1)
        self.count = full + (1 if rest and not drop_last else 0)

    def remap_items(self, items: Any, num_workers: int) -> list[Any]:
        return list(items)

    def read(self, item: Any) -> Any:
        if self.batch_size is None:
            return self.dataset[item]
        start = item * self.batch_size
        positions = list(range(start, min(start + self.batch_size, self.samples)))
        return self.collate(self.dataset.__getitems__(positions))
