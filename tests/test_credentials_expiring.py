"""Keys from every source boto3 resolves, expiring minutes after issue, through a 2-epoch stream.

Issue 26: with less than 30 minutes left on its keys, an assume-role, SSO, ``credential_process``
or container (inline token) source failed every request (``ValueError: expected
datetime.timezone.utc``: obstore was handed botocore's ``tzlocal()`` expiry). Here each source hands
out keys advertising ``MIN_TTL + 1`` seconds (obstore asks for new ones after about a second)
that the bucket refuses 3 seconds after issue (tests/support/expiring_keys.py: the same 2 s between the
refresh and the refusal as ``MIN_TTL + 2`` and 4 s, for the longest request), and a driver process
(tests/scripts/credential_source.py, phase ``epochs``) streams 2 epochs with 2 persistent workers, each worker
downloading for longer than a key is accepted (about 4.8 s): every sample must come once per epoch,
no request may be refused, and the processes must have asked for more keys than there are processes.

A refresh that fails (the source down for a moment, a 500 or a closed connection) is retried with
the storage's backoff, and while the keys from before are still valid they are served; a refusal
(403) fails at once, naming the source. Before, the first failed refresh failed the request.

A request signed in time that reaches the bucket after its key's end (its process paused between
signing and sending) is refused as S3 does (400 ``ExpiredToken``) and signed again once.

A stream is mostly waiting (its samples, its keys' turnover), so the drivers of the stream tests
start with the file's first test and run :data:`CONCURRENT` at a time (the module fixture
``drives``), each through a credential stack of its own (stand-ins, gate, keys and counts): each
test checks its own driver's result and its own stack's keys and refusals, as it would alone.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.scripts.credential_source import EPOCHS, N
from tests.support.cred_harness import objects, run_driver
from tests.support.cred_servers import MIN_TTL, CredentialServer
from tests.support.expiring_keys import SOURCES, ExpiringKeys, start_expiring_keys
from tests.support.fault_proxy import FaultProxy
from tests.support.selected import selected_params
from tests.support.servers import S3Server

# drives: the stream tests' drivers start with the file's first test and stream while the tests
# before theirs (in this process, seconds of botocore's and the proxy's waits) run
pytestmark = [pytest.mark.cloud, pytest.mark.usefixtures("drives")]

THROUGH_BOTO3 = (
    "assume-role-profile",
    "web-identity-profile",
    "credential-process-temporary-profile",
    "sso-session-profile",
    "container-full-uri-no-token",
    "container-full-uri-inline-token",  # AWS_CONTAINER_AUTHORIZATION_TOKEN (EKS Pod Identity, ECS)
)
PROCESSES = 3  # the main process and 2 persistent workers
FAILS = 5  # more than botocore retries itself: 3 tries of the container endpoint, 5 of STS
OUTAGES = [
    ("credential-process-temporary-profile", "500"),  # the process exits non-zero
    ("container-full-uri-inline-token", "close"),
    ("assume-role-profile", "500"),
]
# Drivers streaming at once: each sleeps most of its 6-12 s and uses about 2 CPU-seconds. A request
# must reach the gate within 2 s of its key's replacement; with all 9 at once beside 4 CPU burners the
# oldest key the gates saw was 0.9 s old. 5 makes two rounds, which end about when the file's other
# tests do.
CONCURRENT = 5


@pytest.fixture(scope="module")
def keys(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ExpiringKeys, str]]:
    folder = tmp_path_factory.mktemp("expiring")
    with start_expiring_keys(s3_server.endpoint, folder, lifetime=MIN_TTL + 1, accept_for=3) as running:
        bucket = s3_server.create_bucket()
        _seed(s3_server, bucket, folder / "seed")
        yield running, bucket


def _seed(s3_server: S3Server, bucket: str, local: Path) -> None:
    """The dataset and the raw files, written straight to moto."""
    client = s3_server.client()
    for key, data in objects(local).items():
        client.put_object(Bucket=bucket, Key=key, Body=data)


def _epochs_spec(running: ExpiringKeys, bucket: str, source: str) -> dict[str, Any]:
    """The driver's job: stream the bucket's dataset for 2 epochs with the keys of ``source``."""
    return {
        "source": source,
        "phases": ["epochs"],
        "data": f"s3://{bucket}/data",
        "cache": str(running.folder / f"cache-{source}"),
        "marks": running.stack.credentials.endpoint,
    }


def _stream(running: ExpiringKeys, bucket: str, source: str) -> dict[str, Any]:
    """``source``'s driver through the ``epochs`` phase: its result."""
    return run_driver(_epochs_spec(running, bucket, source), running.environment(source))["epochs"]


def _stream_through_outage(running: ExpiringKeys, bucket: str, source: str, how: str) -> dict[str, Any]:
    """:func:`_stream`, the source failing the next FAILS requests for keys 2 seconds into the stream."""
    ended = threading.Event()

    def outage() -> None:
        # timed from the driver's announcement of its phase, however long the driver took to start
        while running.stack.authority.mark != f"{source}/epochs":
            if ended.wait(0.05):
                return
        if not ended.wait(2.0):
            running.fail_refreshes(FAILS, how)

    thread = threading.Thread(target=outage, name=f"outage-{source}", daemon=True)
    thread.start()
    try:
        return _stream(running, bucket, source)
    finally:
        ended.set()
        thread.join()
        running.fail_refreshes(0)


@dataclass(frozen=True)
class _Drive:
    """A driver run in the background through a credential stack of its own."""

    running: ExpiringKeys
    result: Future[dict[str, Any]]


def _wanted(request: pytest.FixtureRequest) -> list[tuple[str, ...]]:
    """The drives of this file's selected tests, in their order."""
    wanted: list[tuple[str, ...]] = []
    for name, params in selected_params(request):
        if name == "test_keys_expiring_mid_stream_are_refreshed":
            wanted.append(("stream", params["source"]))
        elif name == "test_failed_refreshes_are_retried":
            wanted.append(("outage", params["source"], params["how"]))
    return wanted


@pytest.fixture(scope="module")
def drives(
    s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[dict[tuple[str, ...], _Drive]]:
    """The drivers of the selected stream tests, by key: ``("stream", source)`` or ``("outage", source, how)``.

    They start with the file's first test, CONCURRENT at a time in the tests' order, each through a
    credential stack of its own. A stream's keys are replaced after a second and refused 3 s after
    issue; an outage's live 4 seconds and are accepted as long (every request makes obstore and
    boto3 ask for new ones).
    """
    wanted = _wanted(request)
    if not wanted:
        yield {}
        return
    folder = tmp_path_factory.mktemp("drives")
    bucket = s3_server.create_bucket()
    _seed(s3_server, bucket, folder / "seed")
    found: dict[tuple[str, ...], _Drive] = {}
    with ExitStack() as stacks:
        pool = ThreadPoolExecutor(CONCURRENT, thread_name_prefix="driver")
        try:
            for key in wanted:
                kind, source, *how = key
                lifetime, accept_for = (MIN_TTL + 1, 3.0) if kind == "stream" else (4.0, None)
                keys_of = start_expiring_keys(
                    s3_server.endpoint, folder / "-".join(key), lifetime=lifetime, accept_for=accept_for
                )
                running = stacks.enter_context(keys_of)
                if kind == "stream":
                    found[key] = _Drive(running, pool.submit(_stream, running, bucket, source))
                else:
                    found[key] = _Drive(running, pool.submit(_stream_through_outage, running, bucket, source, *how))
            yield found
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # before the stacks close


def test_boto3_expiry_reaches_obstore_as_utc(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process: keys from a ``credential_process`` expiring in 4 minutes (botocore keeps the
    expiry in dateutil's UTC, which obstore refuses), with an empty session token; obstore gets
    ``datetime.timezone.utc`` and no token, and a request signed with them goes through."""
    import obstore
    from obstore.store import S3Store

    from litdata_io._storage._aws_boto3 import boto3_provider

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


# One GET in a fresh process: the read of a paused process's request.
_LATE_GET = """
import sys
from litdata_io import get_storage
print(get_storage(sys.argv[1], storage_options={"max_retries": 2}).get("raw/000.json").decode())
"""


def _get_in_a_fresh_process(bucket: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``raw/000.json`` of ``bucket`` read by :data:`_LATE_GET` in a fresh process with ``env``."""
    return subprocess.run(
        [sys.executable, "-c", _LATE_GET, f"s3://{bucket}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("source", ["imds", "credential-process-temporary-profile"])
def test_request_arriving_after_its_key_ended_is_signed_again(keys: tuple[ExpiringKeys, str], source: str) -> None:
    """A GET signed with a valid key that reaches the bucket after the key's end is signed again.

    A proxy in front of the gate holds the first GET 4 s (the key is accepted for 3 s), as if its
    process had been paused between signing and sending. The gate refuses it as S3 does (400
    ``ExpiredToken``, a "late arrival": signed in time); litdata signs it again with the keys it
    holds by then (obstore asked for new ones after a second) and the read succeeds.
    """
    running, bucket = keys
    with FaultProxy(running.endpoint) as late:
        late.inject("delay", method="GET", path_contains="raw/000.json", stall=4.0)
        env = running.environment(source)
        env["AWS_ENDPOINT_URL"] = late.endpoint
        running.mark(f"late/{source}")
        done = _get_in_a_fresh_process(bucket, env)
        actions = [action for _, _, action in late.requests("GET", "raw/000.json")]
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"i": 0}
    assert [(verdict, method) for _, verdict, method, _, _ in running.refusals(f"late/{source}")] == [
        ("late arrival", "GET")
    ]
    assert actions == ["delay", "pass"]  # signed again once, and let through


# A credential_process that, the second time it runs (botocore runs it once to resolve the profile,
# then for the keys obstore asks for first), holds the keys it got 4 s before printing them.
_PAUSED_PROCESS = """
import sys, time, urllib.request
from pathlib import Path
keys = urllib.request.urlopen({url!r}, timeout=30).read().decode()
runs = Path({runs!r})
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
if runs.read_text() == "xx":
    time.sleep(4.0)
print(keys)
"""


def test_keys_that_arrive_refused_are_replaced_before_the_second_signing(
    keys: tuple[ExpiringKeys, str], tmp_path: Path
) -> None:
    """Keys fetched before a pause and handed over after it are refused at once; the request's second
    signing carries new ones.

    The ``credential_process`` holds its first keys 4 s (its process paused mid-refresh; the gate
    accepts a key for 3 s), so obstore caches keys the gate already refuses, advertised as valid for
    almost 5 minutes more (obstore asks for new ones within 5 minutes of the end). The GET signed
    with them is refused (an "expired key"); signed again, it must carry new keys. Before, it was
    signed again at once, within obstore's 100 ms between two fetches, with the same keys, and
    failed: the soak's SIGSTOPped downloader, stopped while its keys were being fetched.
    """
    running, bucket = keys
    runs = tmp_path / "runs"
    script = tmp_path / "process.py"
    url = f"{running.stack.credentials.endpoint}/process/credentials"
    script.write_text(_PAUSED_PROCESS.format(url=url, runs=str(runs)))
    (tmp_path / "config").write_text(f"[default]\ncredential_process = {sys.executable} {script}\n")
    env = running.environment("credential-process-temporary-profile")
    env["AWS_CONFIG_FILE"] = str(tmp_path / "config")
    running.mark("paused-refresh")
    done = _get_in_a_fresh_process(bucket, env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"i": 0}
    assert [(verdict, method) for _, verdict, method, _, _ in running.refusals("paused-refresh")] == [
        ("expired key", "GET")
    ]
    # resolving the profile and the paused fetch; after the refusal, a new client resolves it anew and fetches
    # (botocore refreshes keys with less than 10 minutes left at once)
    assert runs.read_text() == "xxxx"


@pytest.fixture
def container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CredentialServer]:
    """A container endpoint with an inline token, the process's only AWS source; keys live 60 s."""
    from tests.support.cred_servers import Authority

    authority = Authority(lifetime=60)
    with CredentialServer(authority) as server:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{server.endpoint}/container/full/v2/credentials")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", server.container_token)
        yield server


def _provider() -> Any:
    """What litdata-io hands obstore for the environment (the inline token goes through boto3)."""
    from litdata_io._storage._aws_config import s3_client_config
    from litdata_io._storage._options import BackendOptions

    _, provider = s3_client_config(BackendOptions(provider="s3", backend="obstore", config={"region": "us-east-1"}))
    assert provider is not None  # obstore's own chain reads only a token file
    return provider


def test_failed_refresh_serves_valid_keys(container: CredentialServer, caplog: pytest.LogCaptureFixture) -> None:
    """The endpoint down (500) while the keys still have a minute: they are served, with one warning,
    and obstore is told to ask again soon; once it is back, new keys come."""
    provider = _provider()
    first = provider()
    container._server.authority.fail_next(2 * 3)  # 3 tries of botocore's each, twice
    with caplog.at_level(logging.WARNING, logger="litdata_io"):
        for _ in range(2):
            again = provider()
            assert again["access_key_id"] == first["access_key_id"]
            left = again["expires_at"] - dt.datetime.now(dt.timezone.utc)
            assert dt.timedelta(minutes=5) < left < dt.timedelta(minutes=5, seconds=3)  # asked again within seconds
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "litdata_io"]
    assert len(warnings) == 1 and "AWS_CONTAINER_CREDENTIALS_FULL_URI" in warnings[0], warnings
    assert provider()["access_key_id"] != first["access_key_id"]


def test_refused_refresh_fails_at_once(container: CredentialServer) -> None:
    """A refusal (403: the token is no longer the endpoint's) is not retried, even with valid keys left."""
    provider = _provider()
    provider()
    container._server.container_token = "rotated"
    started = time.monotonic()
    with pytest.raises(PermissionError, match=r"AWS_CONTAINER_CREDENTIALS_FULL_URI.*permanent failure, 1 attempt"):
        provider()
    assert time.monotonic() - started < 10  # botocore's own 3 tries, no backoff of ours


@pytest.mark.parametrize("source", THROUGH_BOTO3)
def test_keys_expiring_mid_stream_are_refreshed(drives: dict[tuple[str, ...], _Drive], source: str) -> None:
    drive = drives[("stream", source)]
    running, result = drive.running, drive.result.result()
    assert result["error"] is None, result["error"]
    assert [sorted(epoch) for epoch in result["samples"]] == [list(range(N))] * EPOCHS  # each once an epoch
    assert running.refusals(f"{source}/") == []
    issuer = SOURCES[source]
    issued = running.issued(f"{source}/")
    print(source, result["seconds"], "s, keys issued:", issued, "accepted:", running.accepted(f"{source}/"))
    assert set(issued) == {issuer}
    assert issued[issuer] > PROCESSES  # refreshed within processes, not only one key each
    assert set(running.accepted(f"{source}/")) <= {f"s3:{issuer}", "sts:static"}


@pytest.mark.parametrize(("source", "how"), OUTAGES)
def test_failed_refreshes_are_retried(drives: dict[tuple[str, ...], _Drive], source: str, how: str) -> None:
    """The credential source fails the next FAILS requests for keys, 2 seconds into the stream, then
    recovers: the refreshes are retried with backoff and the 2 epochs complete, every sample once."""
    drive = drives[("outage", source, how)]
    running, result = drive.running, drive.result.result()
    assert result["error"] is None, result["error"]
    assert [sorted(epoch) for epoch in result["samples"]] == [list(range(N))] * EPOCHS
    assert running.stack.authority.failed == FAILS  # the outage happened mid-stream, and was outlived
    assert running.refusals(f"{source}/") == []
