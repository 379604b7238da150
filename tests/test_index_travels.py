"""The parsed index travels to the DataLoader workers with the dataset (its ``ChunkOrigin``): no
worker downloads ``index.json`` again (counted at a proxy in front of moto), and none parses it
again (a local index.json turned to garbage after the dataset was made does not matter)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_io import get_storage
from litdata_stream import StreamingDataLoader, StreamingDataset
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Server

N = 40


def _write(folder: Path) -> Path:
    writer = BinaryWriter(folder, chunk_size=10)
    for i in range(N):
        writer.add_item(i, {"index": i, "x": torch.full((4,), float(i))})
    writer.done()
    writer.merge()
    return folder


def _indexes(loader: StreamingDataLoader) -> list[int]:
    return sorted(int(i) for batch in loader for i in batch["index"])


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server.endpoint) as running:
        yield running


@pytest.mark.cloud
def test_workers_do_not_fetch_the_index_again(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, proxy: FaultProxy
) -> None:
    url = f"s3://{s3_bucket}/data"
    storage = get_storage(url, s3_server.storage_options())
    for path in sorted(_write(tmp_path / "local").iterdir()):
        storage.upload(path, path.name)
    proxy.clear()
    dataset = StreamingDataset(
        url, cache_dir=str(tmp_path / "cache"), storage_options=s3_server.storage_options(proxy.endpoint)
    )
    assert len(proxy.requests("GET", "index.json")) == 1  # the dataset's own, when it is made
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2)
    for _ in range(2):  # two epochs: new workers each time
        assert _indexes(loader) == list(range(N))
    assert len(proxy.requests("GET", "index.json")) == 1
    assert len(proxy.requests("GET", "chunk-")) == 4  # every chunk once; the workers did read


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_do_not_parse_a_local_index_again(tmp_path: Path, context: str) -> None:
    folder = _write(tmp_path / "data")
    dataset = StreamingDataset(str(folder))
    (folder / "index.json").write_text("not an index any more")
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context=context)
    assert _indexes(loader) == list(range(N))
