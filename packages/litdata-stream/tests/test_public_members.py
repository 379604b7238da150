"""The datasets show their users only their user API (issue 28).

That is upstream LitData's public members (the methods its docs and its 0.2.76 classes offer,
and its constructor's options kept as attributes), plus what docs/ promise. What a
StreamingDataLoader or a mixing dataset needs of a dataset (its plan, its stretches, the pass to
join) is on the dataset's reader (``litdata_stream._protocol.PassReader``), not on the dataset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torch.utils.data import IterableDataset

from litdata_format import BinaryWriter
from litdata_stream import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataset

# What every dataset has (upstream LitData's methods and attributes of all three).
COMMON = {
    "current_epoch", "set_epoch", "set_shuffle", "set_drop_last", "set_batch_size", "set_num_workers",
    "get_len", "state_dict", "load_state_dict", "batch_size", "num_workers", "drop_last", "seed",
    "force_override_state_dict", "distributed_env",
    # docs/streaming.md, *Subclasses*: a class attribute a subclass may set.
    "batches_in_workers",
}  # fmt: skip

STREAMING = COMMON | {
    # upstream LitData's methods
    "get_by_key", "transform", "subset", "subsampled_files",
    # upstream's constructor options, kept as attributes
    "input_dir", "cache_dir", "item_loader", "shuffle", "subsample", "serializers", "max_cache_size",
    "max_pre_download", "storage_options", "session_options", "index_path", "encryption",
    "num_canonical_nodes",
    # docs/streaming.md: the option, the shuffle in use, the size across ranks, the subclass hook
    "verify_chunks", "shuffle_mode", "num_samples", "samples_are_items",
}  # fmt: skip

COMBINED = COMMON | {"weights", "iterate_over_all", "batching_method"}

PARALLEL = COMMON | {"is_cycling", "is_infinite", "length", "transform", "resume", "reset_rngs"}


def _public(dataset: Any) -> set[str]:
    """The public names of ``dataset`` that torch's ``IterableDataset`` does not give it."""
    return {name for name in dir(dataset) if not name.startswith("_")} - set(dir(IterableDataset))


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    writer = BinaryWriter(str(tmp_path), chunk_size=4)
    for i in range(8):
        writer.add_item(i, {"x": np.int64(i)})
    writer.done()
    writer.merge()
    return tmp_path


def test_a_streaming_dataset_shows_only_its_user_api(dataset_dir: Path) -> None:
    dataset = StreamingDataset(dataset_dir)
    assert _public(dataset) == STREAMING


def test_combined_and_parallel_datasets_show_only_their_user_api(dataset_dir: Path) -> None:
    combined = CombinedStreamingDataset([StreamingDataset(dataset_dir), StreamingDataset(dataset_dir)])
    assert _public(combined) == COMBINED
    parallel = ParallelStreamingDataset([StreamingDataset(dataset_dir), StreamingDataset(dataset_dir)])
    assert _public(parallel) == PARALLEL


def test_a_loaders_pass_sets_nothing_on_the_dataset(dataset_dir: Path) -> None:
    """The workers get the pass to join from the reader the loader hands them, not from a field
    set on the shared dataset while they start (and cleared after)."""
    from litdata_stream import StreamingDataLoader

    dataset = StreamingDataset(dataset_dir)
    loader = StreamingDataLoader(dataset, batch_size=2, num_workers=1)
    before = dict(vars(dataset))
    batches = iter(loader)
    next(batches)
    assert dict(vars(dataset)).keys() == before.keys()
    assert all(vars(dataset)[name] is value for name, value in before.items())
    assert len(list(batches)) == 3
