"""The cloud examples of upstream's docs, against the local servers: S3 (moto), GCS (fake-gcs),
Azure (Azurite) and the Hugging Face Hub stand-in.

Adapted only in: bucket names (the session's buckets), endpoints and credentials. Where an example
reads credentials from ``os.environ`` the test sets those variables to the local server's, so the
example's code runs as written; where it passes no credentials at all, the standard AWS
variables (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...) carry them, as on a real machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import botocore
import botocore.config
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import litdata as ld
from litdata import StreamingDataLoader, StreamingDataset
from litdata_format import BinaryWriter
from litdata_io import get_storage
from tests.support import servers_extra
from tests.support.servers import S3Server
from tests.support.servers_extra import AzuriteServer, FakeGcsServer, HfHubServer

pytestmark = pytest.mark.cloud

azurite = servers_extra.azurite  # the session fixtures, bound here so pytest finds them
fake_gcs = servers_extra.fake_gcs
hf_hub = servers_extra.hf_hub

MDS = Path(__file__).resolve().parents[1] / "packages/litdata-format/tests/fixtures/mds-0.13.0/mds_all_columns"
_AWS_ENV = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3")


def _dataset(folder: Path, n: int = 100) -> Path:
    writer = BinaryWriter(folder, chunk_bytes="4KB")
    for i in range(n):
        writer.add_item(i, {"index": i, "value": np.full(8, i, dtype=np.int64)})
    writer.done()
    writer.merge()
    return folder


def _upload(folder: Path, url: str, options: dict[str, Any] | None = None) -> str:
    storage = get_storage(url, options or {})
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            storage.upload(path, path.relative_to(folder).as_posix())
    return url


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, s3_server: S3Server) -> S3Server:
    """The standard AWS variables point at moto, as a real machine's would point at AWS."""
    for var in _AWS_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_REGION", s3_server.region)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "litdata-cache"))
    return s3_server


@pytest.fixture
def my_data(tmp_path: Path, aws_env: S3Server, s3_bucket: str) -> str:
    return _upload(_dataset(tmp_path / "local"), f"s3://{s3_bucket}/my-data")


def _make_public(server: S3Server, url: str) -> None:
    client = server.client()
    bucket = url.removeprefix("s3://").split("/", 1)[0]
    client.put_bucket_acl(Bucket=bucket, ACL="public-read")
    for entry in client.list_objects_v2(Bucket=bucket)["Contents"]:
        client.put_object_acl(Bucket=bucket, Key=entry["Key"], ACL="public-read")


def process(batch: Any) -> None:
    assert tuple(batch["value"].shape[1:]) == (8,)


def test_stream_from_s3_with_options_and_cache_dir(my_data: str, aws_env: S3Server, tmp_path: Path) -> None:
    dataset = StreamingDataset(my_data, shuffle=True)
    dataloader = StreamingDataLoader(dataset, batch_size=64)

    seen = []
    for batch in dataloader:
        process(batch)  # Replace with your data processing logic
        seen.extend(batch["index"].tolist())
    assert sorted(seen) == list(range(100))

    # boto3 compatible storage options for a custom S3-compatible endpoint
    storage_options = {
        "endpoint_url": aws_env.endpoint,
        "aws_access_key_id": aws_env.access_key,
        "aws_secret_access_key": aws_env.secret_key,
    }

    dataset = StreamingDataset(my_data, storage_options=storage_options)
    assert dataset[7]["index"] == 7

    # Initialize the StreamingDataset with the custom cache directory
    dataset = StreamingDataset(my_data, cache_dir=str(tmp_path / "path/to/cache"))
    assert dataset[8]["index"] == 8 and list((tmp_path / "path/to/cache").rglob("*.bin"))

    # Explore a large dataset: its length and one element
    dataset = StreamingDataset(my_data)  # data are stored in the cloud
    print(len(dataset))  # display the length of your data
    print(dataset[42])  # show the 42th element of the dataset
    assert len(dataset) == 100 and dataset[42]["index"] == 42


def test_cache_size_and_cache_folders(my_data: str, tmp_path: Path) -> None:
    from litdata.streaming.cache import Dir

    dataset = StreamingDataset(
        my_data,
        max_cache_size="10GB",
        max_pre_download=4,  # chunks each worker may prefetch (default 2; async may floor to 4)
    )
    assert sum(len(b["index"]) for b in StreamingDataLoader(dataset, batch_size=10, num_workers=2)) == 100

    # Simple: dedicated cache directory
    cache = str(tmp_path / "path/to/your/cache")
    dataset = StreamingDataset(my_data, cache_dir=cache)
    assert dataset[1]["index"] == 1

    # Or when cache path and remote URL should differ:
    dataset = StreamingDataset(input_dir=Dir(path=cache, url=my_data))
    assert dataset[2]["index"] == 2 and list(Path(cache).rglob("index.json"))

    from litdata.streaming.resolver import Dir as ResolverDir

    dataset = StreamingDataset(ResolverDir(path=str(tmp_path / "fast-ssd/cache/run-1"), url=my_data))
    # Equivalent:
    same = StreamingDataset(my_data, cache_dir=str(tmp_path / "fast-ssd/cache/run-1"))
    assert [s["index"] for s in dataset] == [s["index"] for s in same] == list(range(100)) and ResolverDir is Dir


def test_s3_credentials_and_session_options(my_data: str, aws_env: S3Server, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    (tmp_path / "aws-config").write_text(f"[profile litdata]\nregion = {aws_env.region}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_PROFILE_NAME", "litdata")
    monkeypatch.setenv("AWS_REGION_NAME", aws_env.region)

    # Read data from AWS S3 using boto3
    aws_storage_options = {
        "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
    }
    # You can also pass the session options. (for boto3 only)
    aws_session_options = {
        "profile_name": os.environ["AWS_PROFILE_NAME"],  # Required only for custom profiles
        "region_name": os.environ["AWS_REGION_NAME"],  # Required only for custom regions
    }
    dataset = ld.StreamingDataset(my_data, storage_options=aws_storage_options, session_options=aws_session_options)
    assert dataset[3]["index"] == 3

    # Read Data from AWS S3 with Unsigned Request using boto3: a public bucket, as on AWS
    _make_public(aws_env, my_data)
    aws_storage_options = {
        "config": botocore.config.Config(
            retries={"max_attempts": 1000, "mode": "adaptive"},  # Configure retries for S3 operations
            signature_version=botocore.UNSIGNED,  # Use unsigned requests
        )
    }
    dataset = ld.StreamingDataset(my_data, storage_options=aws_storage_options)
    assert dataset[4]["index"] == 4

    aws_storage_options = {
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
        "S3_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],  # Required only for custom endpoints
    }
    dataset = ld.StreamingDataset(my_data, storage_options=aws_storage_options)
    assert dataset[5]["index"] == 5


def test_gcs_with_project(tmp_path: Path, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = fake_gcs.create_bucket()
    options = fake_gcs.gcsfs_options()
    _upload(_dataset(tmp_path / "local"), f"gs://{bucket}/my-data", {**options, "backend": "fsspec"})
    monkeypatch.setenv("PROJECT_ID", fake_gcs.project)

    # Read data from GCS
    gcp_storage_options = {
        "project": os.environ["PROJECT_ID"],
        **options,  # the emulator's endpoint and anonymous token
    }
    dataset = ld.StreamingDataset(f"gs://{bucket}/my-data", storage_options=gcp_storage_options,
                                  cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert len(dataset) == 100 and dataset[9]["index"] == 9


def test_azure_with_account_url(tmp_path: Path, azurite: AzuriteServer, monkeypatch: pytest.MonkeyPatch) -> None:
    container = azurite.create_container()
    monkeypatch.setenv("AZURE_ACCOUNT_ACCESS_KEY", azurite.account_key)

    # Read data from Azure (the account URL is Azurite's, path-style, instead of <name>.blob.core.windows.net)
    azure_storage_options = {
        "account_url": azurite.endpoint,
        "credential": os.environ["AZURE_ACCOUNT_ACCESS_KEY"],
    }
    _upload(_dataset(tmp_path / "local"), f"azure://{container}/my-data", azure_storage_options)
    dataset = ld.StreamingDataset(f"azure://{container}/my-data", storage_options=azure_storage_options,
                                  cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert len(dataset) == 100 and dataset[11]["index"] == 11


def test_mds_from_s3(aws_env: S3Server, s3_bucket: str) -> None:
    # point to your MDS dataset stored locally or in the cloud
    mds_dataset_uri = _upload(MDS, f"s3://{s3_bucket}/my-mds-data")  # or a local path

    # LitData automatically detects and deserializes the MDS format
    dataset = ld.StreamingDataset(mds_dataset_uri)

    print("Sample", dataset[0])

    # collate_fn: the fixture has PIL / JPEG columns, which torch's default collate cannot batch
    dataloader = ld.StreamingDataLoader(dataset, batch_size=4, collate_fn=list)
    batches = 0
    for _sample in dataloader:
        batches += 1
    assert batches == -(-len(dataset) // 4) and len(dataset) > 0
    assert ld.StreamingDataset(str(MDS))[0].keys() == dataset[0].keys()


def _parquet(folder: Path, files: int = 3, rows: int = 20) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        pq.write_table(pa.table({"id": ids, "content": [f"text {i}" for i in ids]}), folder / f"part-{f}.parquet",
                       row_group_size=5)  # fmt: skip
    return folder


@pytest.mark.slow
def test_parquet_index_and_stream_with_spawn(tmp_path: Path, aws_env: S3Server, s3_bucket: str) -> None:
    from litdata.streaming.item_loader import ParquetLoader

    _upload(_parquet(tmp_path / "local"), f"s3://{s3_bucket}/my-parquet-data")
    ld.index_parquet_dataset(
        f"s3://{s3_bucket}/my-parquet-data",  # local path, s3://, gs://, or hf://
        cache_dir=None,  # see table below
        storage_options={},  # cloud credentials / endpoints
        num_workers=4,  # parallel metadata reads
    )

    uri = f"s3://{s3_bucket}/my-parquet-data"
    dataset = ld.StreamingDataset(
        uri,
        item_loader=ParquetLoader(low_memory=True),  # default: row-group streaming
        # index_path="/path/to/index.json",         # optional if index lives elsewhere
    )

    print(dataset[0])  # dict of columns
    assert dataset[0] == {"id": 0, "content": "text 0"}

    # Linux + num_workers>0: use spawn (Polars + fork deadlocks)
    dataloader = ld.StreamingDataLoader(
        dataset,
        batch_size=4,
        num_workers=2,  # 4 in the docs; this machine has 2 cores
        multiprocessing_context="spawn",
    )
    ids = []
    for batch in dataloader:
        ids.extend(int(i) for i in batch["id"])
    assert sorted(ids) == list(range(60))


def test_map_with_parquet_reader_into_s3(tmp_path: Path, aws_env: S3Server, s3_bucket: str) -> None:
    from litdata import map
    from litdata.processing.readers import ParquetReader
    from tests.support.doc_example_fns import process

    list_of_parquet_paths = [str(p) for p in sorted(_parquet(tmp_path / "pq", files=2, rows=30).iterdir())]
    map(
        fn=process,
        inputs=list_of_parquet_paths,
        output_dir=f"s3://{s3_bucket}/out",
        # to_pandas=False: the fn gets a ParquetFile, as the docs' comment says (the default, to_pandas=True
        # as upstream, hands a pandas DataFrame; tests/scripts/install_matrix.py runs that after `pip install litdata`)
        reader=ParquetReader(cache_folder=str(tmp_path / "pq-shards"), num_rows=10, to_pandas=False),
        num_workers=1,
        start_method="fork",
    )
    storage = get_storage(f"s3://{s3_bucket}/out", {})
    counts = sorted(int(storage.get(info.key)) for info in storage.list(""))
    assert counts == [10] * 6  # 2 files of 30 rows, split into shards of at most 10 rows


def test_supported_uri_schemes(tmp_path: Path, my_data: str, aws_env: S3Server, fake_gcs: FakeGcsServer,
                               azurite: AzuriteServer, hf_hub: HfHubServer) -> None:  # fmt: skip
    local = _dataset(tmp_path / "var/data/fast_data", n=100)
    bucket = fake_gcs.create_bucket()
    gcs = _upload(local, f"gs://{bucket}/fast_data", {**fake_gcs.gcsfs_options(), "backend": "fsspec"})
    container = azurite.create_container()
    azure_options = {"account_url": azurite.endpoint, "credential": azurite.account_key}
    azure = _upload(local, f"azure://{container}/fast_data", azure_options)
    r2_options = {"endpoint_url": aws_env.endpoint, "aws_access_key_id": aws_env.access_key,
                  "aws_secret_access_key": aws_env.secret_key}  # fmt: skip
    repo = hf_hub.dataset_repo()
    _parquet(repo / "data")
    shared = shutil.copytree(local, tmp_path / "data/shared-drive/some-data")

    # Same APIs — only the path changes
    datasets = [
        StreamingDataset(my_data, shuffle=True, drop_last=True),
        StreamingDataset(gcs, storage_options=fake_gcs.gcsfs_options()),
        StreamingDataset(my_data.replace("s3://", "r2://"), storage_options=r2_options),
        StreamingDataset(azure, storage_options=azure_options),
        StreamingDataset(
            f"hf://datasets/{repo.parent.name}/{repo.name}/data", storage_options={"endpoint": hf_hub.endpoint}
        ),
        StreamingDataset(f"local:{shared}"),
        StreamingDataset(str(local)),  # plain local directory
    ]
    assert [len(d) for d in datasets] == [100, 100, 100, 100, 60, 100, 100]
    assert [d[5]["index"] for i, d in enumerate(datasets) if i != 4] == [5] * 6
    assert datasets[4][5] == {"id": 5, "content": "text 5"}
