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

# Where each public name is documented. ``UPSTREAM`` names a public member of upstream LitData
# 0.2.76's class that its user docs (/work/shared/LITDATA-DOCS.txt) do not spell out; a quoted
# "..." is the words of those docs that show it; docs/... is this repository's page and section.
UPSTREAM = "upstream 0.2.76's class"

# What every dataset has (upstream LitData's methods and attributes of all three).
COMMON = {
    "current_epoch": f"{UPSTREAM}; docs/streaming.md, Epochs",
    "set_epoch": f"{UPSTREAM}; docs/streaming.md, Epochs",
    "set_shuffle": UPSTREAM,
    "set_drop_last": UPSTREAM,
    "set_batch_size": UPSTREAM,
    "set_num_workers": UPSTREAM,
    "get_len": f"{UPSTREAM}; docs/streaming.md, What a dataset shows you",
    "state_dict": '"Resume with loader.state_dict() / load_state_dict()"',
    "load_state_dict": '"Resume with loader.state_dict() / load_state_dict()"',
    "batch_size": UPSTREAM,
    "num_workers": UPSTREAM,
    "drop_last": "\"StreamingDataset('s3://my-bucket/my-train-data', shuffle=True, drop_last=True)\"",
    "seed": '"Other knobs: seed (default 42)"',
    "force_override_state_dict": '"force_override_state_dict=True to let local ctor args override a loaded checkpoint"',
    "distributed_env": UPSTREAM,
    "batches_in_workers": "docs/streaming.md, *Subclasses* (a class attribute a subclass may set)",
}

STREAMING = COMMON | {
    "get_by_key": f"{UPSTREAM}; docs/optimize.md (key_fn), docs/streaming.md, Random access",
    "transform": '"StreamingDataset(data_dir, ..., transform=[transform_fn])"; a subclass may override it',
    "subset": '"Or pick exact indices with StreamingDataset.subset"',
    "subsampled_files": f"{UPSTREAM}; docs/streaming.md, What a dataset shows you",
    # upstream's constructor options, kept as attributes
    "input_dir": '"ds = StreamingDataset(input_dir=data_dir, encryption=fernet)"',
    "cache_dir": "\"StreamingDataset('s3://my-bucket/my-data', cache_dir=...)\"",
    "item_loader": '"ld.StreamingDataset(uri, item_loader=ParquetLoader(), index_path=...)"',
    "shuffle": "\"StreamingDataset('s3://my-bucket/my-data', shuffle=True)\"",
    "subsample": '"StreamingDataset(..., subsample=0.01)"',
    "serializers": '"Pass custom serializers when streaming" (serializers={...})',
    "max_cache_size": '"Default max_cache_size is None"',
    "max_pre_download": '"Peak disk ~ num_workers x max_pre_download x mean_chunk_size"',
    "storage_options": "\"StreamingDataset('s3://my-bucket/my-data', storage_options=storage_options)\"",
    "session_options": '"optional session_options for boto3 profiles"',
    "index_path": '"ld.StreamingDataset(uri, item_loader=ParquetLoader(), index_path=...)"',
    "encryption": '"ds = StreamingDataset(input_dir=data_dir, encryption=fernet)"',
    "num_canonical_nodes": '"StreamingDataset(..., shuffle=True, num_canonical_nodes=8)"',
    # what docs/ promise
    "verify_chunks": "docs/streaming.md, Options; docs/cache.md",
    "shuffle_mode": "docs/streaming.md, Shuffling on network filesystems",
    "num_samples": "docs/streaming.md, What a dataset shows you",
    "samples_are_items": "docs/streaming.md, *Subclasses* (a class attribute a subclass may set)",
}

COMBINED = COMMON | {
    "weights": '"CombinedStreamingDataset(..., weights=weights, iterate_over_all=False)"',
    "iterate_over_all": '"iterate_over_all vs weights (important)"',
    "batching_method": '"Batching Methods (batching_method)"',
}

PARALLEL = COMMON | {
    "is_cycling": f"{UPSTREAM}; docs/streaming.md, What a dataset shows you",
    "is_infinite": f"{UPSTREAM}; docs/streaming.md, What a dataset shows you",
    "length": '"ParallelStreamingDataset([dataset], length=100)"',
    "transform": '"ParallelStreamingDataset([dset_1, dset_2], transform=transform)"',
    "resume": f"{UPSTREAM} (its resume= option); docs/mixing.md",
    "reset_rngs": "docs/mixing.md (reset_rngs=True)",
}

# What a StreamingDataLoader adds to torch's DataLoader.
LOADER = {
    "current_epoch": f"{UPSTREAM}; docs/streaming.md, Epochs",
    "state_dict": '"Resume with loader.state_dict() / load_state_dict()"',
    "load_state_dict": '"Resume with loader.state_dict() / load_state_dict()"',
    "stats": "docs/streaming.md, When the loader stalls (loader.stats())",
    "user_collate_fn": "docs/streaming.md, What a dataset shows you (what optimize(inputs=loader) batches with)",
}


def _public(obj: Any) -> set[str]:
    """The public names of ``obj`` that torch's ``IterableDataset`` does not give it."""
    return {name for name in dir(obj) if not name.startswith("_")} - set(dir(IterableDataset))


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
    assert _public(dataset) == set(STREAMING)


def test_combined_and_parallel_datasets_show_only_their_user_api(dataset_dir: Path) -> None:
    combined = CombinedStreamingDataset([StreamingDataset(dataset_dir), StreamingDataset(dataset_dir)])
    assert _public(combined) == set(COMBINED)
    parallel = ParallelStreamingDataset([StreamingDataset(dataset_dir), StreamingDataset(dataset_dir)])
    assert _public(parallel) == set(PARALLEL)


def test_a_streaming_dataloader_adds_only_its_documented_members(dataset_dir: Path) -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from litdata_stream import StreamingDataLoader

    loader = StreamingDataLoader(StreamingDataset(dataset_dir), batch_size=2)
    torch_loader = DataLoader(TensorDataset(torch.arange(4)), batch_size=2)  # torch sets its attributes in __init__
    assert _public(loader) - _public(torch_loader) == set(LOADER)


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
