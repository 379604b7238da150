"""The Azure, GCS and Hugging Face emulators work with the raw clients litdata-io builds on."""

from __future__ import annotations

import os
from pathlib import Path

import obstore
import pytest
from obstore.store import AzureStore, GCSStore

from tests.support import servers_extra
from tests.support.servers_extra import AzuriteServer, FakeGcsServer, HfHubServer

pytestmark = pytest.mark.cloud

# The session fixtures, bound here so pytest finds them (an import of the names would trip F811).
azurite = servers_extra.azurite
fake_gcs = servers_extra.fake_gcs
hf_hub = servers_extra.hf_hub


# -- Azure ----------------------------------------------------------------------------------------
def _exercise_azure(store: AzureStore) -> None:
    obstore.put(store, "dir/a.bin", b"0123456789")
    obstore.put(store, "dir/sub/b.bin", b"xyz")
    assert bytes(obstore.get(store, "dir/a.bin").bytes()) == b"0123456789"
    assert bytes(obstore.get_range(store, "dir/a.bin", start=2, end=5)) == b"234"
    assert obstore.head(store, "dir/a.bin")["size"] == 10
    assert sorted(m["path"] for m in obstore.list(store, "dir").collect()) == ["dir/a.bin", "dir/sub/b.bin"]
    listing = obstore.list_with_delimiter(store, "dir")
    assert listing["common_prefixes"] == ["dir/sub"]
    assert [m["path"] for m in listing["objects"]] == ["dir/a.bin"]
    obstore.delete(store, "dir/a.bin")
    with pytest.raises(FileNotFoundError):
        obstore.get(store, "dir/a.bin")


def test_azurite_obstore_use_emulator(azurite: AzuriteServer, monkeypatch: pytest.MonkeyPatch) -> None:
    azurite.create_container("emulated")
    # In emulator mode obstore takes the URL from this variable only (``endpoint`` is ignored).
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", azurite.blob_url)
    _exercise_azure(AzureStore("emulated", use_emulator=True))


def test_azurite_obstore_explicit_endpoint(azurite: AzuriteServer) -> None:
    azurite.create_container("explicit")
    _exercise_azure(AzureStore("explicit", **azurite.obstore_config()))


def test_azurite_container_creation_is_signed_and_idempotent(azurite: AzuriteServer) -> None:
    azurite.create_container("twice")
    azurite.create_container("twice")
    status, body = azurite.request("GET", "?comp=list")
    assert status == 200
    assert b"<Name>twice</Name>" in body
    store = AzureStore("missing", **azurite.obstore_config())
    with pytest.raises(Exception, match="ContainerNotFound|404"):
        obstore.put(store, "x", b"x")


# -- GCS ------------------------------------------------------------------------------------------
def test_fake_gcs_gcsfs_writes_obstore_reads(fake_gcs: FakeGcsServer) -> None:
    from gcsfs.core import GCSFileSystem  # the plain class: the emulator cannot answer the default class's gRPC probe

    fake_gcs.create_bucket("rawgcs")
    fake_gcs.create_bucket("rawgcs")  # idempotent
    fs = GCSFileSystem(**fake_gcs.gcsfs_options(), skip_instance_cache=True)
    fs.pipe("rawgcs/dir/a.bin", b"0123456789")
    big = os.urandom(3 * 2**20 + 17)
    # A resumable upload, fed in 256 KiB pieces: gcsfs hands aiohttp each flushed buffer as raw
    # bytes, and aiohttp warns (ResourceWarning, an error here) about bodies over 1 MiB.
    with fs.open("rawgcs/dir/sub/big.bin", "wb", block_size=2**18) as handle:
        for start in range(0, len(big), 2**18):
            handle.write(big[start : start + 2**18])  # pyright: ignore[reportArgumentType]  (a binary file)
    assert fs.cat("rawgcs/dir/a.bin") == b"0123456789"

    store = GCSStore("rawgcs", **fake_gcs.obstore_config())
    assert bytes(obstore.get(store, "dir/a.bin").bytes()) == b"0123456789"
    assert bytes(obstore.get(store, "dir/sub/big.bin").bytes()) == big
    assert bytes(obstore.get_range(store, "dir/sub/big.bin", start=2**20, end=2**20 + 100)) == big[2**20 : 2**20 + 100]
    assert obstore.head(store, "dir/sub/big.bin")["size"] == len(big)
    assert sorted(m["path"] for m in obstore.list(store, "dir").collect()) == ["dir/a.bin", "dir/sub/big.bin"]
    listing = obstore.list_with_delimiter(store, "dir")
    assert listing["common_prefixes"] == ["dir/sub"]
    with pytest.raises(FileNotFoundError):
        obstore.get(store, "dir/missing.bin")

    fs.rm("rawgcs/dir/a.bin")
    assert not fs.exists("rawgcs/dir/a.bin")
    with pytest.raises(FileNotFoundError):
        obstore.head(store, "dir/a.bin")


# -- Hugging Face ---------------------------------------------------------------------------------
@pytest.fixture
def hf_repo(hf_hub: HfHubServer) -> tuple[HfHubServer, bytes]:
    repo = hf_hub.dataset_repo("org/name")
    big = os.urandom(3 * 2**20 + 5)
    (repo / "sub").mkdir(exist_ok=True)
    (repo / "index.json").write_bytes(b'{"chunks": []}')
    (repo / "sub" / "chunk-0.bin").write_bytes(big)
    return hf_hub, big


def test_hf_hub_filesystem_reads(hf_repo: tuple[HfHubServer, bytes]) -> None:
    from huggingface_hub import HfFileSystem

    server, big = hf_repo
    assert os.environ["HF_ENDPOINT"] == server.endpoint
    fs = HfFileSystem(endpoint=server.endpoint, skip_instance_cache=True)
    root = "hf://datasets/org/name"

    assert sorted(str(name) for name in fs.ls(root, detail=False)) == [
        "datasets/org/name/index.json",
        "datasets/org/name/sub",
    ]
    assert fs.find(root) == ["datasets/org/name/index.json", "datasets/org/name/sub/chunk-0.bin"]
    info = fs.info(f"{root}/sub/chunk-0.bin")
    assert (info["type"], info["size"]) == ("file", len(big))
    assert fs.info(f"{root}/sub")["type"] == "directory"
    assert fs.cat(f"{root}/index.json") == b'{"chunks": []}'
    assert fs.cat_file(f"{root}/sub/chunk-0.bin") == big
    assert fs.cat_file(f"{root}/sub/chunk-0.bin", start=10, end=20) == big[10:20]
    assert fs.cat_file(f"{root}/sub/chunk-0.bin", start=-7) == big[-7:]
    with fs.open(f"{root}/sub/chunk-0.bin", "rb", block_size=2**20) as handle:  # block-cached ranged reads
        handle.seek(2**21 + 3)
        assert handle.read(100) == big[2**21 + 3 : 2**21 + 103]
    assert fs.exists(f"{root}/index.json")
    assert not fs.exists(f"{root}/missing.json")
    with pytest.raises(FileNotFoundError):
        fs.cat(f"{root}/missing.json")
    with pytest.raises(FileNotFoundError):
        fs.ls("hf://datasets/org/nonexistent")


def test_hf_hub_sees_new_files_and_ranges_over_http(hf_repo: tuple[HfHubServer, bytes], tmp_path: Path) -> None:
    import urllib.request

    from huggingface_hub import HfFileSystem

    server, big = hf_repo
    (server.dataset_repo("org/name") / "late.txt").write_text("late")
    fs = HfFileSystem(endpoint=server.endpoint, skip_instance_cache=True)
    assert fs.cat("hf://datasets/org/name/late.txt") == b"late"

    url = f"{server.endpoint}/datasets/org/name/resolve/main/sub/chunk-0.bin"
    request = urllib.request.Request(url, headers={"Range": "bytes=5-9"})
    with servers_extra.urlopen(request) as response:
        assert response.status == 206
        assert response.headers["Content-Range"] == f"bytes 5-9/{len(big)}"
        assert response.read() == big[5:10]
    with servers_extra.urlopen(urllib.request.Request(url, method="HEAD")) as response:
        assert int(response.headers["Content-Length"]) == len(big)
        assert response.headers["X-Repo-Commit"]
        assert response.headers["ETag"]
