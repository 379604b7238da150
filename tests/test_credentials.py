"""Every AWS credential source, in every kind of process litdata runs, against a bucket that checks signatures.

Each source gets one fresh driver process (``tests/cred_driver.py``) whose environment holds that
source and no keys; the driver streams with ``num_workers=0``, with 2 workers under fork (the
default), spawn and forkserver, optimizes into the bucket with 2 workers and reads
``StreamingRawDataset`` with 2 workers. One driver runs every phase of its source, so a source
costs one interpreter start plus its workers. The S3 endpoint it is given is the signing checker
(``tests/cred_servers.py``), which forwards to moto only what a key from the expected source
signed, and counts everything else.

The relative container URI's host is fixed at ``169.254.170.2:80`` (by the AWS spec, obstore and
botocore): its driver runs in a network namespace of its own (``tests/netns.py``, ``unshare -rn``)
whose loopback has that address, bridged to the stand-in outside through a Unix socket.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cred_driver import N
from tests.cred_harness import clean_environment, objects, port_of, run_driver
from tests.cred_servers import (
    ACCOUNT,
    MIN_TTL,
    ROLE_ARN,
    SSO_ROLE,
    CredentialStack,
    start_credential_stack,
)
from tests.servers import S3Server

pytestmark = pytest.mark.cloud

ALL = ("w0", "fork", "spawn", "forkserver", "optimize", "raw")
SOURCES: dict[str, str] = {
    # source: who issues the keys S3 requests must be signed with
    "imds": "imds",
    "assume-role-profile": "assume-role",
    "web-identity": "web-identity",
    "container-full-uri": "container-full",
    "container-full-uri-no-token": "container-open",
    "container-relative-uri": "container-relative",
    "static-profile": "static",
    "credential-process-profile": "static",
    "sso-session-profile": "sso",
    "sso-legacy-profile": "sso",
    "ca-bundle-profile": "static",  # the bucket behind a private CA, trusted through the profile's ca_bundle
}
CONTAINER_HOST = "169.254.170.2"  # the relative URI's fixed host (port 80)
SSO_START_URL = "https://litdata-test.awsapps.com/start"
STATIC = ("AKIASTATICPROFILE001", "static-profile-secret")
BASE = ("AKIAROLESOURCE000001", "role-source-secret")
PROCESS = ("AKIACREDPROCESS00001", "credential-process-secret")


@pytest.fixture(scope="module")
def stack(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("creds")
    with start_credential_stack(s3_server.endpoint, folder) as credentials:
        bucket = s3_server.create_bucket()
        _seed(s3_server, bucket, folder / "seed")
        credentials.authority.register_static(*STATIC, services=("s3",))
        credentials.authority.register_static(*PROCESS, services=("s3",))  # what the credential_process prints
        credentials.authority.register_static(*BASE, services=("sts",))  # may only assume the role
        yield {"stack": credentials, "bucket": bucket, "folder": folder}


def _seed(server: S3Server, bucket: str, local: Path) -> None:
    """Written straight to moto with the test keys."""
    client = server.client()
    for key, data in objects(local).items():
        client.put_object(Bucket=bucket, Key=key, Body=data)


def _environment(source: str, credentials: CredentialStack, folder: Path) -> dict[str, str]:
    """A clean environment with one AWS credential source."""
    home = folder / f"home-{source}"
    env = clean_environment(home)
    server = credentials.credentials.endpoint
    env.update(
        AWS_REGION="us-east-1",
        AWS_ENDPOINT_URL=credentials.checker.endpoint,
        AWS_CONFIG_FILE=str(home / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",  # a source that fails must not reach for a real 169.254.169.254
    )
    token_file = home / "token"
    if source == "ca-bundle-profile":
        env["AWS_ENDPOINT_URL"] = credentials.tls_checker.endpoint
        (home / "credentials").write_text(
            f"[default]\naws_access_key_id = {STATIC[0]}\naws_secret_access_key = {STATIC[1]}\n"
        )
        (home / "config").write_text(f"[default]\nca_bundle = {credentials.ca_file}\n")
    elif source.startswith("sso-"):
        _sso_profile(env, home, credentials, legacy=source == "sso-legacy-profile")
    elif source == "container-relative-uri":
        env["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/container/relative/v2/credentials"
    elif source == "imds":
        del env["AWS_EC2_METADATA_DISABLED"]
        env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server
    elif source == "web-identity":
        token_file.write_text(credentials.credentials.web_identity_token)
        env.update(
            AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file),
            AWS_ROLE_ARN=ROLE_ARN,
            AWS_ENDPOINT_URL_STS=credentials.tls_credentials.endpoint + "/sts/",
            AWS_CA_BUNDLE=str(credentials.ca_file),  # obstore calls STS over HTTPS only: behind a private CA here
        )
    elif source == "container-full-uri":
        token_file.write_text(credentials.credentials.container_token)
        env.update(
            AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{server}/container/full/v2/credentials",
            AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
        )
    elif source == "container-full-uri-no-token":
        env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = f"{server}/container/open/v2/credentials"
    elif source == "static-profile":
        (home / "credentials").write_text(
            f"[default]\naws_access_key_id = {STATIC[0]}\naws_secret_access_key = {STATIC[1]}\n"
        )
    elif source == "credential-process-profile":
        keys = {"Version": 1, "AccessKeyId": PROCESS[0], "SecretAccessKey": PROCESS[1]}
        (home / "process.py").write_text(f"print({json.dumps(json.dumps(keys))})\n")
        (home / "config").write_text(f"[default]\ncredential_process = {sys.executable} {home / 'process.py'}\n")
    elif source == "assume-role-profile":
        (home / "config").write_text(
            f"[profile train]\nrole_arn = {ROLE_ARN}\nsource_profile = base\n\n"
            f"[profile base]\naws_access_key_id = {BASE[0]}\naws_secret_access_key = {BASE[1]}\n"
        )
        env.update(AWS_PROFILE="train", AWS_ENDPOINT_URL_STS=f"{server}/sts/")
    return env


def _sso_profile(env: dict[str, str], home: Path, credentials: CredentialStack, *, legacy: bool) -> None:
    """An SSO profile as ``aws configure sso`` writes it, and the token ``aws sso login`` caches.

    The sso-session form keys the cached token by the session's name, the legacy form by the start URL.
    """
    import hashlib

    role = f"sso_account_id = {ACCOUNT}\nsso_role_name = {SSO_ROLE}\n"
    if legacy:
        config = f"[profile train]\nsso_start_url = {SSO_START_URL}\nsso_region = us-east-1\n{role}"
        cache_key = SSO_START_URL
    else:
        config = (
            f"[profile train]\nsso_session = corp\n{role}\n"
            f"[sso-session corp]\nsso_start_url = {SSO_START_URL}\nsso_region = us-east-1\n"
        )
        cache_key = "corp"
    (home / "config").write_text(config)
    cache = home / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    token = {
        "startUrl": SSO_START_URL,
        "region": "us-east-1",
        "accessToken": credentials.credentials.sso_token,
        "expiresAt": "2099-01-01T00:00:00Z",  # valid: boto3 has nothing to refresh through SSO-OIDC
    }
    (cache / f"{hashlib.sha1(cache_key.encode()).hexdigest()}.json").write_text(json.dumps(token))
    env.update(AWS_PROFILE="train", AWS_ENDPOINT_URL_SSO=credentials.credentials.endpoint)


def _drive(stack: dict[str, Any], source: str, phases: tuple[str, ...]) -> dict[str, Any]:
    credentials: CredentialStack = stack["stack"]
    folder: Path = stack["folder"]
    bucket = stack["bucket"]
    spec = {
        "source": source,
        "phases": list(phases),
        "data": f"s3://{bucket}/data",
        "raw": f"s3://{bucket}/raw",
        "output": f"s3://{bucket}/out-{source}",
        "cache": str(folder / f"cache-{source}"),
        "marks": credentials.credentials.endpoint,
    }
    namespace = None
    if source == "container-relative-uri":
        ports = [port_of(credentials.checker.endpoint), port_of(credentials.credentials.endpoint)]
        namespace = {f"127.0.0.1:{port}": port for port in ports} | {f"{CONTAINER_HOST}:80": ports[1]}
    return run_driver(spec, _environment(source, credentials, folder), namespace)


@pytest.fixture(scope="module")
def drive(stack: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    """Runs each source's driver once, on first use, and remembers its results."""
    results: dict[str, dict[str, Any]] = {}

    def run(source: str) -> dict[str, Any]:
        if source not in results:
            results[source] = _drive(stack, source, ALL)
        return results[source]

    return run


@pytest.mark.parametrize(("source", "phase"), [(source, phase) for source in SOURCES for phase in ALL])
def test_source_in_every_process(
    stack: dict[str, Any], drive: Callable[[str], dict[str, Any]], source: str, phase: str
) -> None:
    result = drive(source)[phase]
    assert result["error"] is None, result["error"]
    assert sorted(result["samples"]) == list(range(N))  # every sample, once
    issuer = SOURCES[source]
    issued, verdicts = stack["stack"].authority.counts(f"{source}/{phase}")
    refused = {verdict: n for verdict, n in verdicts.items() if not verdict.startswith("ok")}
    assert refused == {}, [entry for entry in stack["stack"].authority.refusals if entry[0] == f"{source}/{phase}"]
    assert set(verdicts) == {f"ok:s3:{issuer}"} | ({"ok:sts:static"} if issuer == "assume-role" else set())
    assert set(issued) <= {issuer}  # nothing else handed out keys (static keys are never "issued")


def test_source_hands_out_keys(stack: dict[str, Any], drive: Callable[[str], dict[str, Any]]) -> None:
    for source, issuer in SOURCES.items():
        drive(source)
        issued, _ = stack["stack"].authority.counts(f"{source}/")
        assert issued == ({} if issuer == "static" else {issuer: issued.get(issuer, 0)})
        assert issuer == "static" or issued[issuer] >= 1


def test_credentials_expiring_mid_epoch_are_refreshed(stack: dict[str, Any]) -> None:
    """IMDS hands out keys that obstore should replace after a second (5 minutes + 1 s left) and the
    checker refuses three seconds after issue; an epoch of several seconds over 2 workers still
    sees every sample, and more than one key was issued."""
    authority = stack["stack"].authority
    authority.reset(lifetime=MIN_TTL + 1, accept_for=3)
    try:
        result = _drive(stack, "imds", ("raw-slow",))["raw-slow"]
    finally:
        authority.reset()
    assert result["error"] is None, result["error"]
    assert sorted(result["samples"]) == list(range(N))
    issued, verdicts = authority.counts("imds/raw-slow")
    print("raw-slow", result["seconds"], "s, keys issued:", issued, "verdicts:", verdicts)
    assert {verdict for verdict in verdicts} == {"ok:s3:imds"}, verdicts
    assert issued["imds"] > 3  # each process refreshed, more than once
