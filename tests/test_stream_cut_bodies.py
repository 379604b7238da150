"""A chunk GET whose body arrives cut short is a transfer fault, retried within the retry budget (issue 51, 6).

The fault proxy forwards half of each chunk's body as if it were whole (``cut_body``: its
``Content-Length`` says half, as a middlebox whose upstream connection dropped sends what it got),
for the first two tries of every chunk. The client cannot tell such an answer from a whole one; the
cache can (the index gives the chunk's size and checksum), and a HEAD says the object itself is
whole. A dataset is called rewritten only when the stored object's own size is not the index's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from litdata_format import BinaryWriter
from litdata_io import ChunkDownloadError, get_storage
from litdata_stream import StreamingDataset
from tests.support.fault_proxy import FaultProxy
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

SAMPLES, CHUNK = 200, 20
FAST = {"backoff_base": 0.01, "backoff_max": 0.05}


def _upload(tmp_path: Path, server: S3Server, bucket: str, checksums: bool) -> str:
    local = tmp_path / "local"
    writer = BinaryWriter(local, chunk_size=CHUNK)
    for i in range(SAMPLES):
        writer.add_item(i, {"index": i, "x": torch.full((16,), float(i))})
    writer.done()
    writer.merge()
    if not checksums:  # as upstream LitData and other tools write it
        index = json.loads((local / "index.json").read_text())
        for chunk in index["chunks"]:
            chunk.pop("checksum", None)
            chunk.pop("plain_checksum", None)
        (local / "index.json").write_text(json.dumps(index))
    url = f"s3://{bucket}/data"
    storage = get_storage(url, server.storage_options())
    for path in sorted(local.iterdir()):
        storage.upload(path, path.name)
    return url


@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "sizes-only"])
def test_bodies_cut_short_twice_per_chunk_are_fetched_again(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, checksums: bool
) -> None:
    url = _upload(tmp_path, s3_server, s3_bucket, checksums)
    with FaultProxy(s3_server.endpoint) as proxy:
        for chunk in range(SAMPLES // CHUNK):
            proxy.inject("cut_body", method="GET", path_contains=f"chunk-0-{chunk}.bin", times=2)
        options = {**s3_server.storage_options(proxy.endpoint), **FAST}
        dataset = StreamingDataset(url, storage_options=options, cache_dir=str(tmp_path / "cache"))
        assert sorted(int(sample["index"]) for sample in dataset) == list(range(SAMPLES))
        cut = [path for _, path, action in proxy.requests("GET") if action == "cut_body"]
        assert len(cut) == 2 * SAMPLES // CHUNK  # every chunk was cut twice, then read whole


def test_cuts_beyond_the_budget_fail_as_a_transfer_fault_not_a_rewrite(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    url = _upload(tmp_path, s3_server, s3_bucket, checksums=False)
    with FaultProxy(s3_server.endpoint) as proxy:
        proxy.inject("cut_body", method="GET", path_contains="chunk-0-0.bin", times=100)
        options = {**s3_server.storage_options(proxy.endpoint), **FAST, "max_retries": 3}
        dataset = StreamingDataset(url, storage_options=options, cache_dir=str(tmp_path / "cache"), shuffle=False)
        with pytest.raises(ChunkDownloadError) as info:
            next(iter(dataset))
        message = str(info.value)
        assert "chunk-0-0.bin" in message and "connection dropped" in message and "max_retries=3" in message
        assert "rewritten" not in message
        assert len(proxy.requests("GET", "chunk-0-0.bin")) == 4  # 1 + max_retries
