"""The conformance suite on Azure Blob (Azurite on 127.0.0.1) through obstore's AzureStore."""

from __future__ import annotations

import pytest

from litdata_io import Storage, get_storage
from litdata_io.testing import StorageConformance, StorageFactory
from tests.support import servers_extra
from tests.support.servers_extra import AzuriteServer

pytestmark = pytest.mark.cloud

azurite = servers_extra.azurite  # the session fixture, bound here so pytest finds it


class _AzureConformance(StorageConformance):
    """The shared suite as is: a forked child reads through obstore (here or through the helper), adlfs or not."""


class TestAzureStorage(_AzureConformance):
    """``account_url`` + ``credential`` (the Azure SDK's spelling), a fresh container per test."""

    @pytest.fixture
    def storage_factory(self, azurite: AzuriteServer) -> StorageFactory:
        container = azurite.create_container()

        def make(**options: object) -> Storage:
            return get_storage(
                f"azure://{container}/some/prefix",
                storage_options={"account_url": azurite.endpoint, "credential": azurite.account_key, **options},
            )

        return make

    @pytest.fixture
    def secrets(self, azurite: AzuriteServer) -> list[str]:
        return [azurite.account_key]

    def test_objects_land_under_the_prefix(self, storage: Storage, azurite: AzuriteServer) -> None:
        import obstore
        from obstore.store import AzureStore

        storage.put("k.bin", b"v")
        container = storage.url.split("://", 1)[1].split("/", 1)[0]
        raw = AzureStore(container, **azurite.obstore_config())
        assert [item["path"] for item in obstore.list(raw).collect()] == ["some/prefix/k.bin"]


class TestAzureConnectionStringStorage(_AzureConformance):
    """A connection string (with its ``BlobEndpoint``) and the ``az://`` scheme."""

    @pytest.fixture
    def storage_factory(self, azurite: AzuriteServer) -> StorageFactory:
        container = azurite.create_container()

        def make(**options: object) -> Storage:
            return get_storage(
                f"az://{container}/data",
                storage_options={"connection_string": azurite.connection_string, **options},
            )

        return make

    @pytest.fixture
    def secrets(self, azurite: AzuriteServer) -> list[str]:
        return [azurite.account_key, azurite.connection_string]


class TestAzureEmulatorStorage(_AzureConformance):
    """``UseDevelopmentStorage=true``: obstore's emulator mode, with the well-known account and key.

    obstore takes the emulator's address from ``AZURITE_BLOB_STORAGE_URL`` only (default
    ``http://127.0.0.1:10000``); ``endpoint`` is ignored in that mode.
    """

    @pytest.fixture
    def storage_factory(self, azurite: AzuriteServer, monkeypatch: pytest.MonkeyPatch) -> StorageFactory:
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", azurite.blob_url)
        container = azurite.create_container()

        def make(**options: object) -> Storage:
            return get_storage(
                f"azure://{container}/emulated",
                storage_options={"connection_string": "UseDevelopmentStorage=true", **options},
            )

        return make
