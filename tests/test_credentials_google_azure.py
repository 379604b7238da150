"""GCS and Azure token sources, in the main process, forked workers and StreamingRawDataset's workers.

Each source runs one fresh driver process (``tests/scripts/credential_source.py``: ``num_workers=0``, 2 forked
workers, ``StreamingRawDataset`` with 2 workers) whose environment holds that source and no keys.
The store's endpoint is a proxy (``BearerChecker`` in ``tests/support/cred_servers.py``) that forwards only
requests carrying a bearer token the stand-ins issued, or a JWT signed by the test's
service-account key, and counts the others; they must be 0.

- GCS, in front of fake-gcs-server (which checks no tokens): the metadata server
  (``GCE_METADATA_HOST``), a service-account key file (``GOOGLE_APPLICATION_CREDENTIALS``, or
  ``storage_options={"service_account_path": ...}``): obstore signs its own JWT with the file's key,
  no token endpoint involved), and application default credentials of an authorized user (the file
  gcloud writes, with a refresh token). obstore sends the refresh token to the fixed
  ``https://accounts.google.com/o/oauth2/token``: that driver runs in a network namespace where
  the name resolves to 127.0.0.1 and port 443 leads to the HTTPS stand-in (``tests/support/netns.py``).
- Azure, in front of Azurite: a client secret (``AZURE_CLIENT_ID``/``AZURE_CLIENT_SECRET``/
  ``AZURE_TENANT_ID`` with ``AZURE_AUTHORITY_HOST`` at the stand-in) and a managed identity
  (App Service's ``IDENTITY_ENDPOINT`` + ``IDENTITY_HEADER``). Azurite accepts bearer tokens only
  over HTTPS with its own OAuth mode, so the proxy checks the token, drops the header and forwards
  to a public-access container: the proxy is the only judge of the credentials, and the tests read
  only (optimize's uploads are covered with keys by tests/test_storage_azure.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.scripts.credential_source import N
from tests.support import servers_extra
from tests.support.cred_harness import clean_environment, objects, port_of, run_driver
from tests.support.cred_servers import (
    IDENTITY_HEADER,
    OAUTH_CLIENT,
    REFRESH_TOKEN,
    Authority,
    BearerChecker,
    CredentialServer,
    tls_context,
)
from tests.support.servers_extra import AzuriteServer, FakeGcsServer

pytestmark = pytest.mark.cloud
fake_gcs = servers_extra.fake_gcs  # the session fixtures, bound here so pytest finds them
azurite = servers_extra.azurite

PHASES = ["w0", "fork", "raw"]
KEY_ID = "litdata-test-key-1"
EMAIL = "loader@litdata-test.iam.gserviceaccount.com"
GCS_SOURCES = {  # source: who issues the tokens requests must carry
    "gce": "gce",
    "service-account-env": "service-account",
    "service-account-option": "service-account",
    "adc-authorized-user": "gcs-user",
}
AZURE_SOURCES = {"client-secret": "azure-client-secret", "managed-identity": "azure-msi"}


@dataclass(frozen=True)
class Tokens:
    """The token stand-ins (HTTP and HTTPS) and what they trust and hand out."""

    authority: Authority
    plain: CredentialServer
    secure: CredentialServer
    ca_file: Path  # the CA of ``secure``'s certificate
    key_file: Path  # a service-account key file whose key the checker trusts


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tokens]:
    """The token stand-ins (HTTP and HTTPS), and a service-account key file whose key the checker trusts."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    folder = tmp_path_factory.mktemp("tokens")
    authority = Authority()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    authority.jwt_keys[KEY_ID] = (EMAIL, key.public_key())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    key_file = folder / "service-account.json"
    key_file.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "litdata-test",
                "private_key_id": KEY_ID,
                "private_key": pem.decode(),
                "client_email": EMAIL,
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    tls, ca_file = tls_context(folder)
    with CredentialServer(authority) as plain, CredentialServer(authority, tls) as secure:
        yield Tokens(authority, plain, secure, ca_file, key_file)


def _judge(authority: Authority, source: str, service: str, issuer: str, results: dict[str, Any]) -> None:
    for phase, result in results.items():
        assert result["error"] is None, result["error"]
        assert sorted(result["samples"]) == list(range(N)), phase  # every sample, once
        issued, verdicts = authority.counts(f"{source}/{phase}")
        refusals = [entry for entry in authority.refusals if entry[0] == f"{source}/{phase}"]
        assert set(verdicts) == {f"ok:{service}:{issuer}"}, (phase, verdicts, refusals)  # nothing unauthenticated
        assert set(issued) <= {issuer}
    if issuer != "service-account":  # a service account signs its own tokens
        assert authority.counts(f"{source}/")[0][issuer] >= 1


@pytest.mark.parametrize("source", list(GCS_SOURCES))
def test_gcs_source_in_every_process(tokens: Tokens, fake_gcs: FakeGcsServer, tmp_path: Path, source: str) -> None:
    from gcsfs.core import GCSFileSystem  # the plain class: the emulator cannot answer the default class's gRPC probe

    bucket = fake_gcs.create_bucket()
    fs = GCSFileSystem(**fake_gcs.gcsfs_options(), skip_instance_cache=True)
    for key, data in objects(tmp_path / "seed").items():
        fs.pipe_file(f"{bucket}/{key}", data)
    home = tmp_path / "home"
    env = clean_environment(home)
    options: dict[str, Any] = {}
    namespace: dict[str, int] | None = None
    with BearerChecker(fake_gcs.endpoint, tokens.authority, "gcs") as checker:
        if source == "gce":
            env["GCE_METADATA_HOST"] = tokens.plain.endpoint.split("://", 1)[1]
        elif source == "service-account-env":
            env["GOOGLE_APPLICATION_CREDENTIALS"] = str(tokens.key_file)
        elif source == "service-account-option":
            options["service_account_path"] = str(tokens.key_file)
        else:  # what `gcloud auth application-default login` writes
            adc = home / ".config" / "gcloud" / "application_default_credentials.json"
            adc.parent.mkdir(parents=True)
            client_id, client_secret = OAUTH_CLIENT
            user = {"client_id": client_id, "client_secret": client_secret, "refresh_token": REFRESH_TOKEN}
            adc.write_text(json.dumps({**user, "type": "authorized_user"}))
            env["SSL_CERT_FILE"] = str(tokens.ca_file)  # the stand-in's certificate for accounts.google.com
            ports = (port_of(checker.endpoint), port_of(tokens.plain.endpoint))
            namespace = {f"127.0.0.1:{port}": port for port in ports} | {
                "127.0.0.1:443": port_of(tokens.secure.endpoint)
            }
        spec = {
            "source": source,
            "phases": PHASES,
            "data": f"gs://{bucket}/data",
            "raw": f"gs://{bucket}/raw",
            "options": {**options, "endpoint_url": checker.endpoint},  # the emulator's address
            "cache": str(tmp_path / "cache"),
            "marks": tokens.plain.endpoint,
        }
        results = run_driver(spec, env, namespace, hosts=["accounts.google.com"] if namespace else ())
    _judge(tokens.authority, source, "gcs", GCS_SOURCES[source], results)


@pytest.mark.parametrize("source", list(AZURE_SOURCES))
def test_azure_source_in_every_process(tokens: Tokens, azurite: AzuriteServer, tmp_path: Path, source: str) -> None:
    from obstore.store import AzureStore

    container = azurite.create_container(public=True)
    store = AzureStore(container, **azurite.obstore_config())
    for key, data in objects(tmp_path / "seed").items():
        store.put(key, data)
    env = clean_environment(tmp_path / "home")
    if source == "client-secret":
        client_id, client_secret = OAUTH_CLIENT
        env.update(
            AZURE_CLIENT_ID=client_id,
            AZURE_CLIENT_SECRET=client_secret,
            AZURE_TENANT_ID="litdata-tenant",
            AZURE_AUTHORITY_HOST=tokens.plain.endpoint,
        )
    else:
        env.update(IDENTITY_ENDPOINT=f"{tokens.plain.endpoint}/msi/token", IDENTITY_HEADER=IDENTITY_HEADER)
    with BearerChecker(azurite.blob_url, tokens.authority, "azure", drop_authorization=True) as checker:
        spec = {
            "source": source,
            "phases": PHASES,
            "data": f"azure://{container}/data",
            "raw": f"azure://{container}/raw",
            "options": {"account_name": azurite.account_name, "endpoint": f"{checker.endpoint}/{azurite.account_name}"},
            "cache": str(tmp_path / "cache"),
            "marks": tokens.plain.endpoint,
        }
        results = run_driver(spec, env)
    _judge(tokens.authority, source, "azure", AZURE_SOURCES[source], results)
