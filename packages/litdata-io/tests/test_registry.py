"""The scheme registry, read-only stores, missing extras and what a pickle carries."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from litdata_io import Dir, ObjectInfo, ReadOnlyStorageError, Storage, get_storage, register_storage, registered_schemes
from litdata_io._storage._local import LocalStorage
from litdata_io._storage._schemes import _need


class _DictStorage(Storage):
    """A third-party backend: objects in a dict."""

    def __init__(self, url: str, storage_options: Any = None, session_options: Any = None) -> None:
        self.url = url
        self.objects: dict[str, bytes] = {}
        self.storage_options = storage_options

    async def ahead(self, key: str) -> ObjectInfo:
        if key not in self.objects:
            raise FileNotFoundError(self.url_for(key))
        return ObjectInfo(key, len(self.objects[key]))

    async def alist(self, prefix: str = "", recursive: bool = True) -> list[ObjectInfo]:
        return [ObjectInfo(k, len(v)) for k, v in sorted(self.objects.items()) if k.startswith(prefix)]

    async def aget(self, key: str) -> bytes:
        await self.ahead(key)
        return self.objects[key]

    async def aget_range(self, key: str, start: int, end: int) -> bytes:
        return (await self.aget(key))[start:end]

    async def aput(self, key: str, data: bytes) -> None:
        self.objects[key] = bytes(data)

    async def adelete(self, key: str) -> None:
        self.objects.pop(key, None)


def test_register_a_third_party_scheme(tmp_path: Path) -> None:
    register_storage("dictfs", _DictStorage)
    storage = get_storage("dictfs://place/data", storage_options={"anything": 1})
    assert isinstance(storage, _DictStorage) and storage.url == "dictfs://place/data"
    assert storage.storage_options == {"anything": 1}
    storage.put("a", b"1")
    storage.download("a", tmp_path / "a")  # the base class's conveniences work for any backend
    assert (tmp_path / "a").read_bytes() == b"1"
    assert "dictfs" in registered_schemes()
    with pytest.raises(ValueError, match="overwrite=True"):
        register_storage("dictfs", "somewhere.else:Storage")
    register_storage("dictfs2", f"{__name__}:_DictStorage")
    assert isinstance(get_storage("dictfs2://x"), _DictStorage)


def test_local_paths_dirs_and_drives(tmp_path: Path) -> None:
    assert isinstance(get_storage(tmp_path), LocalStorage)
    assert get_storage(Dir(path=str(tmp_path))).url == str(tmp_path)
    drive = get_storage(Dir(path=str(tmp_path / "cache"), url=f"local:{tmp_path}"))
    assert isinstance(drive, LocalStorage) and drive.url == f"local:{tmp_path}"
    with pytest.raises(ValueError, match="empty Dir"):
        get_storage(Dir())


def test_unknown_scheme_says_how_to_add_one() -> None:
    with pytest.raises(ValueError, match=r"nosuchproto://.*register_storage"):
        get_storage("nosuchproto://x/y")


def test_missing_extra_names_the_install_line() -> None:
    with pytest.raises(ImportError, match=r'pip install "litdata-io\[gcs\]"'):
        _need("a_module_that_is_not_installed", "gs")
    with pytest.raises(ImportError, match=r'pip install "litdata-io\[fsspec\]"'):
        _need("a_module_that_is_not_installed", "sftp")


@pytest.mark.parametrize("url", ["https://example.com/data", "hf://datasets/org/name/data"])
def test_read_only_stores_refuse_writes_clearly(url: str, tmp_path: Path) -> None:
    storage = get_storage(url)
    assert storage.read_only
    (tmp_path / "f").write_bytes(b"x")
    for write in (
        lambda: storage.put("k", b"x"),
        lambda: storage.delete("k"),
        lambda: storage.upload(tmp_path / "f", "k"),
        lambda: storage.copy("a", "b"),
    ):
        with pytest.raises(ReadOnlyStorageError, match="read-only"):
            write()


def test_pickles_carry_options_not_clients() -> None:
    storage = get_storage(
        "s3://bucket/prefix",
        storage_options={"aws_access_key_id": "AKID", "aws_secret_access_key": "needed-by-workers", "max_retries": 2},
    )
    clone = pickle.loads(pickle.dumps(storage))
    assert clone.url == storage.url and clone.settings.max_retries == 2
    assert clone.options.merged()["secret_access_key"] == "needed-by-workers"
    assert "needed-by-workers" not in repr(clone) and "needed-by-workers" not in repr(vars(clone))


def test_http_credentials_in_the_url_move_to_a_hidden_header() -> None:
    storage = get_storage("https://reader:pa55word@example.com:8443/data")
    assert storage.url == "https://example.com:8443/data"
    assert "pa55word" not in repr(storage) and "pa55word" not in repr(vars(storage))
    header = storage.options.client["default_headers"]["Authorization"]  # type: ignore[attr-defined]
    assert header.reveal().startswith("Basic ")
