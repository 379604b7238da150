"""The upstream documentation's examples for StreamingDataset, StreamingDataLoader, transforms,
train_test_split, subsample, subset and profiling, run on local data.

Each test keeps the example's code as written (``import litdata``, the same arguments) with the
bucket URL replaced by a local folder and the sizes scaled down (100,000 samples -> 1,000).
"""

from __future__ import annotations

import os
import pstats
from pathlib import Path
from typing import Any

import pytest
import torch

from litdata_format import BinaryWriter


def _write(path: Path, n: int, serializers: dict[str, Any] | None = None, make: Any = None) -> str:
    writer = BinaryWriter(path, chunk_bytes="16KB", serializers=serializers)
    for i in range(n):
        writer.add_item(i, make(i) if make else {"index": i, "image": torch.full((3, 4, 4), float(i) / n)})
    writer.done()
    writer.merge()
    return str(path)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _write(tmp_path_factory.mktemp("docs") / "my-data", 1000)


def process(batch: Any) -> None:
    assert batch["image"].shape[1:] == (3, 4, 4)


def test_stream_train_and_val(data_dir: str) -> None:
    from litdata import StreamingDataLoader, StreamingDataset

    # For the training dataset, don't forget to enable shuffle and drop_last !!!
    train_dataset = StreamingDataset(data_dir, shuffle=True, drop_last=True)
    train_dataloader = StreamingDataLoader(train_dataset, batch_size=64)

    batches = 0
    for batch in train_dataloader:
        process(batch)  # Replace with your data processing logic
        batches += 1
    assert batches == 1000 // 64

    val_dataset = StreamingDataset(data_dir, shuffle=False, drop_last=False)
    val_dataloader = StreamingDataLoader(val_dataset, batch_size=64)

    seen = []
    for batch in val_dataloader:
        process(batch)  # Replace with your data processing logic
        seen.extend(batch["index"].tolist())
    assert seen == list(range(1000))


def test_stream_basic_and_cache_dir(data_dir: str, tmp_path: Path) -> None:
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(data_dir, shuffle=True)
    dataloader = StreamingDataLoader(dataset, batch_size=64)
    assert sum(len(batch["index"]) for batch in dataloader) == 1000

    # Initialize the StreamingDataset with the custom cache directory (a local: drive goes through it)
    dataset = StreamingDataset(f"local:{data_dir}", cache_dir=str(tmp_path / "path/to/cache"))
    assert dataset[3]["index"] == 3
    assert list((tmp_path / "path/to/cache").rglob("index.json"))


def test_shuffle_seed_and_loader_overrides(data_dir: str) -> None:
    from litdata import StreamingDataLoader, StreamingDataset

    train = StreamingDataset(
        data_dir,
        shuffle=True,
        drop_last=True,  # keep every rank/worker at the same length (default True under DDP)
        seed=42,  # default is 42; keep stable when resuming
    )
    loader = StreamingDataLoader(train, batch_size=64, num_workers=2)
    first = [i for b in loader for i in b["index"].tolist()]
    assert len(first) == 15 * 64 and len(set(first)) == len(first)

    # shuffle=/drop_last= on the loader override the dataset
    loader = StreamingDataLoader(train, batch_size=64, shuffle=True, drop_last=True)
    assert train.shuffle and train.drop_last and len(loader) == 15


def test_num_canonical_nodes_is_accepted(data_dir: str) -> None:
    from litdata import StreamingDataset

    dataset = StreamingDataset(data_dir, shuffle=True, num_canonical_nodes=8)
    assert len(dataset) == 1000


def test_resume_with_torch_save(data_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    from litdata import StreamingDataLoader, StreamingDataset

    def run(stop_after: int | None) -> list[int]:
        dataset = StreamingDataset(data_dir, shuffle=True)
        dataloader = StreamingDataLoader(dataset, num_workers=2, batch_size=64)

        # Restore the dataLoader state if it exists
        if os.path.isfile("dataloader_state.pt"):
            state_dict = torch.load("dataloader_state.pt")  # weights_only: the state is plain data
            dataloader.load_state_dict(state_dict)

        seen = []
        # Iterate over the data
        for batch_idx, batch in enumerate(dataloader):
            seen.extend(batch["index"].tolist())
            # Store the state every 5 batches (1000 in the docs)
            if batch_idx % 5 == 0:
                torch.save(dataloader.state_dict(), "dataloader_state.pt")
            if batch_idx == stop_after:
                break  # the job is killed right after the checkpoint
        return seen

    first = run(stop_after=10)
    second = run(stop_after=None)
    # The checkpoint was taken after batch 10 (batch_idx % 5 == 0): nothing lost, nothing twice.
    assert len(first) == 11 * 64
    assert sorted(first + second) == list(range(1000))


def _torch_transform(x: torch.Tensor) -> torch.Tensor:
    """Stands in for the torchvision Compose of the docs (resize, normalize)."""
    x = torch.nn.functional.interpolate(x[None], size=(8, 8))[0]
    return (x - 0.5) / 0.25


def test_transform_function_list_and_subclass(data_dir: str, tmp_path: Path) -> None:
    from litdata import StreamingDataset

    cache_dir, shuffle = tmp_path / "cache", True

    def transform_fn(x, *args, **kwargs):
        """Define your transform function."""
        return _torch_transform(x["image"])  # Apply the transform to the input image

    # Create dataset with appropriate configuration
    dataset = StreamingDataset(data_dir, cache_dir=str(cache_dir), shuffle=shuffle, transform=[transform_fn])
    assert dataset[0].shape == (3, 8, 8)
    assert next(iter(dataset)).shape == (3, 8, 8)

    class StreamingDatasetWithTransform(StreamingDataset):
        """A custom dataset class that inherits from StreamingDataset and applies a transform."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.torch_transform = _torch_transform

        # Define your transform method
        def transform(self, x, *args, **kwargs):
            """A simple transform function."""
            return self.torch_transform(x["image"])

    dataset = StreamingDatasetWithTransform(data_dir, cache_dir=str(cache_dir), shuffle=shuffle)
    assert dataset[1].shape == (3, 8, 8)
    assert all(sample.shape == (3, 8, 8) for sample in dataset)


def test_train_test_split_and_subset(data_dir: str) -> None:
    from litdata import StreamingDataset, train_test_split

    dataset = StreamingDataset(data_dir)  # data are stored in the cloud

    assert len(dataset) == 1000  # out: 100,000 in the docs

    train_dataset, val_dataset, test_dataset = train_test_split(dataset, splits=[0.3, 0.2, 0.5])
    assert (len(train_dataset), len(val_dataset), len(test_dataset)) == (300, 200, 500)
    ids = [{s["index"] for s in d} for d in (train_dataset, val_dataset, test_dataset)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])

    # Or pick exact indices with StreamingDataset.subset:
    train = dataset.subset(range(0, 300))
    assert len(train) == 300 and len(dataset.subset(slice(0, 100))) == 100


def test_subsample_and_subset_of_indices(data_dir: str) -> None:
    from litdata import StreamingDataset

    dataset = StreamingDataset(data_dir, subsample=0.01)  # data are stored in the cloud
    assert len(dataset) == 10  # out: 1000 in the docs (1% of 100,000)

    # or a list / slice of global indices
    small = dataset.subset([0, 2, 4])
    assert len(small) == 3


def test_subsample_above_one_repeats(data_dir: str) -> None:
    from litdata import StreamingDataset

    dataset = StreamingDataset(data_dir, subsample=2.5, shuffle=True)
    assert len(dataset) == 2500  # out: 250000 in the docs
    counts: dict[int, int] = {}
    for sample in dataset:
        counts[int(sample["index"])] = counts.get(int(sample["index"]), 0) + 1
    assert sorted(set(counts.values())) == [2, 3] and sum(counts.values()) == 2500


class MyType:
    def __init__(self, value: int) -> None:
        self.value = value

    def to_bytes(self) -> bytes:
        return self.value.to_bytes(4, "little")

    @classmethod
    def from_bytes(cls, data: bytes) -> MyType:
        return cls(int.from_bytes(bytes(data), "little"))


def test_custom_serializers_when_streaming(tmp_path: Path) -> None:
    from litdata import StreamingDataset
    from litdata.streaming.serializers import Serializer

    class MyTypeSerializer(Serializer):
        def serialize(self, item):  # pyright: ignore[reportIncompatibleMethodOverride]
            return item.to_bytes(), None  # (bytes, optional metadata string)

        def deserialize(self, data: bytes):  # pyright: ignore[reportIncompatibleMethodOverride]
            return MyType.from_bytes(data)

        def can_serialize(self, item) -> bool:  # pyright: ignore[reportIncompatibleMethodOverride]
            return isinstance(item, MyType)

    path = _write(tmp_path / "data", 20, {"my_type": MyTypeSerializer()}, make=lambda i: {"v": MyType(i * 3)})
    dataset = StreamingDataset(
        path,
        serializers={"my_type": MyTypeSerializer()},  # merged on top of built-ins
    )
    assert dataset[5]["v"].value == 15


def train_step(batch: Any) -> None:
    assert len(batch["index"]) == 64


def test_profiling_with_viztracer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = _write(tmp_path / "my-data", 64 * 4 * 26)
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(data, shuffle=True, drop_last=True)

    loader = StreamingDataLoader(
        dataset,
        batch_size=64,
        num_workers=4,
        profile_batches=20,  # record this many batches (int), or True for the whole run
        profile_skip_batches=5,  # warm up / skip cold-start batches before recording
        profile_dir="./profiles",  # where to write result.json (default: cwd)
    )

    for batch in loader:
        train_step(batch)
        # after profile_batches (+ skip) complete, worker 0 saves the trace and prints the path
    assert (tmp_path / "profiles" / "result.json").stat().st_size > 0


def test_profiling_with_cprofile(data_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(data_dir, shuffle=True, drop_last=True)
    loader = StreamingDataLoader(
        dataset,
        batch_size=64,
        num_workers=4,
        profile_cprofile=True,
        profile_dir="./profiles",
    )

    for batch in loader:
        train_step(batch)
    # writes profiles/cprofile_main.prof + cprofile_worker0.prof (and .txt summaries)
    for name in ("cprofile_main", "cprofile_worker0"):
        assert (tmp_path / "profiles" / f"{name}.txt").exists()
        # python -m pstats profiles/cprofile_worker0.prof, then: sort tottime / stats 30
        pstats.Stats(str(tmp_path / "profiles" / f"{name}.prof")).sort_stats("tottime")
