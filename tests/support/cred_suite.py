"""The AWS credential sources run in every kind of process litdata starts: the shared fixtures.

``tests/test_credentials.py``, ``tests/test_credentials_containers.py`` and
``tests/test_credentials_profiles.py`` each check a group of the sources (split so that the two
xdist workers, which take whole files, share them). The files share one credential stack per
test process (``aws_stack``, session-scoped: the signing checker in front of moto, the credential
stand-ins, a seeded bucket; every count it keeps is per source and phase, and each file has sources
of its own) and run each source's driver once (``aws_drive``); ``tests/conftest.py`` exposes both.

Each source gets one driver process (``tests/scripts/credential_source.py``, forked from the torch-preloaded
zygote of ``tests/support/zygote.py``) whose environment holds that source and no keys; the driver streams
with ``num_workers=0``, with 2 workers under fork (the default), spawn and forkserver, optimizes
into the bucket with 2 workers and reads ``StreamingRawDataset`` with 2 workers. One driver runs
every phase of its source, so a source costs one fork plus its workers (the spawn and forkserver
phases start fresh interpreters: that is what they check). The S3 endpoint it is given is the
signing checker (``tests/support/cred_servers.py``), which forwards to moto only what a key from the
expected source signed, and counts everything else.

The relative container URI's host is fixed at ``169.254.170.2:80`` (by the AWS spec, obstore and
botocore): its driver runs in a network namespace of its own (``tests/support/netns.py``, ``unshare -rn``)
whose loopback has that address, bridged to the stand-in outside through a Unix socket (a fresh
interpreter: the zygote's children live outside that namespace).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.scripts.credential_source import N
from tests.support.cred_harness import (
    AWS_SOURCES,
    aws_source_environment,
    objects,
    port_of,
    register_static_keys,
    run_driver,
)
from tests.support.cred_servers import CredentialStack, start_credential_stack
from tests.support.servers import S3Server

__all__ = [
    "ALL",
    "SOURCES",
    "aws_drive",
    "aws_stack",
    "check_source_hands_out_keys",
    "check_source_in_phase",
    "drive_source",
]

ALL = ("w0", "fork", "spawn", "forkserver", "optimize", "raw")
# source: who issues the keys S3 requests must be signed with (ca-bundle-profile: the bucket behind a
# private CA, trusted through the profile's ca_bundle; the temporary credential_process and the
# web-identity profile and the container URI with an inline token run in tests/test_credentials_expiring.py)
SOURCES = {
    source: issuer
    for source, issuer in AWS_SOURCES.items()
    if source not in ("credential-process-temporary-profile", "web-identity-profile", "container-full-uri-inline-token")
}
CONTAINER_HOST = "169.254.170.2"  # the relative URI's fixed host (port 80)


@pytest.fixture(scope="session")
def aws_stack(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("creds")
    with start_credential_stack(s3_server.endpoint, folder) as credentials:
        bucket = s3_server.create_bucket()
        _seed(s3_server, bucket, folder / "seed")
        register_static_keys(credentials.authority)
        yield {"stack": credentials, "bucket": bucket, "folder": folder}


def _seed(server: S3Server, bucket: str, local: Path) -> None:
    """Written straight to moto with the test keys."""
    client = server.client()
    for key, data in objects(local).items():
        client.put_object(Bucket=bucket, Key=key, Body=data)


def drive_source(stack: dict[str, Any], source: str, phases: tuple[str, ...]) -> dict[str, Any]:
    """Run ``source``'s driver through ``phases``; its results by phase."""
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
    return run_driver(spec, aws_source_environment(source, credentials, folder), namespace)


@pytest.fixture(scope="session")
def aws_drive(aws_stack: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    """Runs each source's driver once, on first use, and remembers its results."""
    results: dict[str, dict[str, Any]] = {}

    def run(source: str) -> dict[str, Any]:
        if source not in results:
            results[source] = drive_source(aws_stack, source, ALL)
        return results[source]

    return run


def check_source_in_phase(
    stack: dict[str, Any], drive: Callable[[str], dict[str, Any]], source: str, phase: str
) -> None:
    """Every sample once in ``phase`` of ``source``'s driver, every request signed by its issuer's keys."""
    result = drive(source)[phase]
    assert result["error"] is None, result["error"]
    assert sorted(result["samples"]) == list(range(N))  # every sample, once
    issuer = SOURCES[source]
    issued, verdicts = stack["stack"].authority.counts(f"{source}/{phase}")
    refused = {verdict: n for verdict, n in verdicts.items() if not verdict.startswith("ok")}
    assert refused == {}, [entry for entry in stack["stack"].authority.refusals if entry[0] == f"{source}/{phase}"]
    assert set(verdicts) == {f"ok:s3:{issuer}"} | ({"ok:sts:static"} if issuer == "assume-role" else set())
    assert set(issued) <= {issuer}  # nothing else handed out keys (static keys are never "issued")


def check_source_hands_out_keys(
    stack: dict[str, Any], drive: Callable[[str], dict[str, Any]], sources: tuple[str, ...]
) -> None:
    """Each of ``sources`` handed out keys (static ones never are), and only its own issuer did."""
    for source in sources:
        issuer = SOURCES[source]
        drive(source)
        issued, _ = stack["stack"].authority.counts(f"{source}/")
        assert issued == ({} if issuer == "static" else {issuer: issued.get(issuer, 0)})
        assert issuer == "static" or issued[issuer] >= 1


def group_tests(group: tuple[str, ...]) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two tests of one file of sources (a file each, so pytest-xdist spreads the slow drivers).

    Assign them to ``test_source_in_every_process, test_source_hands_out_keys`` in the file.
    """

    @pytest.mark.parametrize(("source", "phase"), [(source, phase) for source in group for phase in ALL])
    def in_every_process(
        aws_stack: dict[str, Any], aws_drive: Callable[[str], dict[str, Any]], source: str, phase: str
    ) -> None:
        check_source_in_phase(aws_stack, aws_drive, source, phase)

    def hands_out_keys(aws_stack: dict[str, Any], aws_drive: Callable[[str], dict[str, Any]]) -> None:
        check_source_hands_out_keys(aws_stack, aws_drive, group)

    return in_every_process, hands_out_keys
