"""Keys from every source boto3 resolves, expiring minutes after issue, through a 2-epoch stream.

Issue 26: with less than 30 minutes left on its keys, an assume-role, SSO, ``credential_process``
or container (inline token) source failed every request (``ValueError: expected
datetime.timezone.utc``: obstore was handed botocore's ``tzlocal()`` expiry). Here each source hands
out keys advertising ``MIN_TTL + 2`` seconds (obstore asks for new ones after about two seconds)
that the bucket refuses 4 seconds after issue (tests/expiring_keys.py), and a driver process
(tests/cred_driver.py, phase ``epochs``) streams 2 epochs with 2 persistent workers, each worker
downloading for longer than a key is accepted: every sample must come once per epoch, no request
may be refused, and the processes must have asked for more keys than there are processes.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cred_driver import EPOCHS, N
from tests.cred_harness import objects, run_driver
from tests.cred_servers import MIN_TTL
from tests.expiring_keys import SOURCES, ExpiringKeys, start_expiring_keys
from tests.servers import S3Server

pytestmark = pytest.mark.cloud

THROUGH_BOTO3 = (
    "assume-role-profile",
    "web-identity-profile",
    "credential-process-temporary-profile",
    "sso-session-profile",
    "container-full-uri-no-token",
)
PROCESSES = 3  # the main process and 2 persistent workers


@pytest.fixture(scope="module")
def keys(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ExpiringKeys, str]]:
    folder = tmp_path_factory.mktemp("expiring")
    with start_expiring_keys(s3_server.endpoint, folder, lifetime=MIN_TTL + 2, accept_for=4) as running:
        bucket = s3_server.create_bucket()
        client = s3_server.client()
        for key, data in objects(folder / "seed").items():
            client.put_object(Bucket=bucket, Key=key, Body=data)
        yield running, bucket


@pytest.mark.parametrize("source", THROUGH_BOTO3)
def test_keys_expiring_mid_stream_are_refreshed(keys: tuple[ExpiringKeys, str], source: str) -> None:
    running, bucket = keys
    spec: dict[str, Any] = {
        "source": source,
        "phases": ["epochs"],
        "data": f"s3://{bucket}/data",
        "cache": str(running.folder / f"cache-{source}"),
        "marks": running.stack.credentials.endpoint,
    }
    result = run_driver(spec, running.environment(source))["epochs"]
    assert result["error"] is None, result["error"]
    assert [sorted(epoch) for epoch in result["samples"]] == [list(range(N))] * EPOCHS  # each once an epoch
    assert running.refusals(f"{source}/") == []
    issuer = SOURCES[source]
    issued = running.issued(f"{source}/")
    print(source, result["seconds"], "s, keys issued:", issued, "accepted:", running.accepted(f"{source}/"))
    assert set(issued) == {issuer}
    assert issued[issuer] > PROCESSES  # refreshed within processes, not only one key each
    assert set(running.accepted(f"{source}/")) <= {f"s3:{issuer}", "sts:static"}


def test_boto3_expiry_reaches_obstore_as_utc(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process: keys from a ``credential_process`` expiring in 4 minutes (botocore keeps the
    expiry in dateutil's UTC, which obstore refuses), with an empty session token; obstore gets
    ``datetime.timezone.utc`` and no token, and a request signed with them goes through."""
    import obstore
    from obstore.store import S3Store

    from litdata_io._aws_boto3 import boto3_provider

    expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(minutes=4)
    keys = {"Version": 1, "AccessKeyId": "AKIAPROCESS", "SecretAccessKey": "secret", "SessionToken": ""}
    keys["Expiration"] = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    (tmp_path / "process.py").write_text(f"print({json.dumps(json.dumps(keys))})\n")
    (tmp_path / "config").write_text(f"[default]\ncredential_process = {sys.executable} {tmp_path / 'process.py'}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))

    provider = boto3_provider(None, "a test", "us-east-1")
    credential = provider()
    told = credential["expires_at"]
    assert told == expires
    assert told is not None and told.tzinfo is dt.timezone.utc
    assert credential.get("token") is None
    bucket = s3_server.create_bucket()
    store = S3Store(
        bucket, endpoint=s3_server.endpoint, credential_provider=provider, client_options={"allow_http": True}
    )
    obstore.put(store, "probe", b"1")
    assert bytes(obstore.get(store, "probe").bytes()) == b"1"
