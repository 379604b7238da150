"""torchdata's ``StatefulDataLoader`` over a StreamingDataset: refused loudly, never a silent repeat.

``StatefulDataLoader`` asks the dataset (in each worker, after every batch) for ``state_dict()``
with no arguments and trusts it instead of counting what it delivered. A StreamingDataset alone
cannot tell how far the loader got, and before this check returned the start of the epoch: a
resume read the whole epoch again (issue 47). Now the first such call fails, naming
StreamingDataLoader (in a worker: with its first batch; without workers: at ``state_dict()``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

from litdata_format import BinaryWriter
from litdata_stream import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset

# torchdata 0.11 calls torch.set_vital, which torch 2.15 deprecates: not this project's warning.
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torchdata") / "data"
    writer = BinaryWriter(root, chunk_size=5)
    for i in range(40):
        writer.add_item(i, {"index": i, "x": torch.zeros(2)})
    writer.done()
    writer.merge()
    return root


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_is_refused_naming_streaming_dataloader(path: Path, workers: int) -> None:
    loader = StatefulDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=workers)
    # Workers take a snapshot with every batch (the first next() fails); without workers the
    # state is made when asked for.
    with pytest.raises(TypeError, match=r"StreamingDataset\.state_dict\(\) needs what the loader delivered") as err:
        next(iter(loader))
        loader.state_dict()
    assert "torchdata's StatefulDataLoader" in str(err.value) and "use litdata's StreamingDataLoader" in str(err.value)


def test_a_state_asked_of_a_dataset_between_passes_is_where_the_next_pass_starts(path: Path) -> None:
    dataset = StreamingDataset(path)
    assert dataset.state_dict()["batches"] == 0  # no pass under way: nothing of it delivered
    list(StreamingDataLoader(dataset, batch_size=4))
    state = dataset.state_dict()
    assert state["epoch"] == 2 and state["batches"] == 0


def test_a_mixed_dataset_is_refused_too(path: Path) -> None:
    mixed = CombinedStreamingDataset([StreamingDataset(path), StreamingDataset(path)])
    with pytest.raises(TypeError, match=r"CombinedStreamingDataset\.state_dict\(\) needs"):
        loader = StatefulDataLoader(mixed, batch_size=4)
        next(iter(loader))
        loader.state_dict()


def test_what_to_use_instead_resumes_exactly(path: Path) -> None:
    full = [
        int(i)
        for b in StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=2)
        for i in b["index"]
    ]
    loader = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=2)
    seen = []
    for batch in loader:
        seen += batch["index"].tolist()
        if len(seen) == 12:
            break
    resumed = StreamingDataLoader(StreamingDataset(path, shuffle=True), batch_size=4, num_workers=2)
    resumed.load_state_dict(loader.state_dict())
    assert len(resumed) == len(loader) == 10
    assert seen + [int(i) for b in resumed for i in b["index"]] == full
