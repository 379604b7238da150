"""Keys the bucket refuses long before their advertised end are replaced from their source (issue 51, 5).

A credential source hands out keys that advertise an hour of life, so no client would replace them
on its own; the bucket stops accepting them after a second and a half ("expired early": S3's 400
``ExpiredToken``) or they are revoked every second and a half ("revoked": 403
``InvalidAccessKeyId``). A driver process streams 2 epochs with 2 persistent workers
(tests/scripts/credential_source.py, phase ``epochs``), each worker downloading for longer than a key is accepted.
On a refusal litdata must ask the source for new keys (not re-sign with the cached ones) and send
the request once more: every sample comes once per epoch, every refused request was sent again
with a key issued after the refusal, and more keys were issued than processes asked for at start.
Before, the request was signed again with the same cached keys, refused again, and the epoch died
with ``PermissionError`` half-way.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.scripts.credential_source import EPOCHS, N
from tests.support import servers_extra
from tests.support.cred_harness import objects, run_driver
from tests.support.expiring_keys import SOURCES, start_expiring_keys
from tests.support.servers import S3Server
from tests.support.servers_extra import FakeGcsServer

pytestmark = pytest.mark.cloud

PROCESSES = 3  # the main process and 2 persistent workers
ACCEPTED_S = 1.5
fake_gcs = servers_extra.fake_gcs  # the session fixture, bound here so pytest finds it
CASES = [
    ("assume-role-profile", "expired early"),
    ("container-full-uri", "expired early"),  # obstore's own container source
    ("container-full-uri-inline-token", "revoked"),  # through boto3
    ("assume-role-profile", "revoked"),
]


@pytest.mark.parametrize(("source", "how"), CASES)
def test_keys_refused_early_are_fetched_anew_from_their_source(
    s3_server: S3Server, tmp_path: Path, source: str, how: str
) -> None:
    bucket = s3_server.create_bucket()
    client = s3_server.client()
    for key, data in objects(tmp_path / "seed").items():
        client.put_object(Bucket=bucket, Key=key, Body=data)
    accept_for = ACCEPTED_S if how == "expired early" else None
    with start_expiring_keys(s3_server.endpoint, tmp_path / "keys", lifetime=3600, accept_for=accept_for) as keys:
        stop = threading.Event()

        def revoke_every_while() -> None:
            while not stop.wait(ACCEPTED_S):
                keys.stack.authority.revoke()

        revoker = threading.Thread(target=revoke_every_while, daemon=True)
        if how == "revoked":
            revoker.start()
        spec = {
            "source": source,
            "phases": ["epochs"],
            "data": f"s3://{bucket}/data",
            "cache": str(tmp_path / "cache"),
            "marks": keys.stack.credentials.endpoint,
        }
        try:
            result = run_driver(spec, keys.environment(source))["epochs"]
        finally:
            stop.set()
            if revoker.is_alive():
                revoker.join()
        refusals = keys.refusals(f"{source}/")
        issued = keys.issued(f"{source}/")
    assert result["error"] is None, result["error"]
    assert [sorted(epoch) for epoch in result["samples"]] == [list(range(N))] * EPOCHS
    verdict = "expired key" if how == "expired early" else "revoked key"
    assert refusals, "the keys were never refused: the test did not test anything"
    assert {entry[1] for entry in refusals} <= {verdict, "late arrival"}, refusals
    assert issued[SOURCES[source]] > PROCESSES, issued  # fetched anew after refusals, not only at start


_FSSPEC_READER = """
import json, sys
from litdata_io import get_storage
storage = get_storage(sys.argv[1], json.loads(sys.argv[2]))
print(storage.get("a.bin").decode(), flush=True)
sys.stdin.readline()  # the test revokes the token meanwhile
print(storage.get("b.bin").decode(), flush=True)
"""


def test_fsspec_backend_fetches_keys_anew_when_refused(fake_gcs: FakeGcsServer, tmp_path: Path) -> None:
    """gcsfs (``backend="fsspec"``) with the GCE metadata server's tokens: the token it holds revoked.

    Before, the refused request was sent once more through the same filesystem, which held the
    revoked token until its advertised end (an hour), and the read failed with ``PermissionError``.
    Now the filesystem is dropped and made anew, so gcsfs asks the metadata server again. (A
    process of its own: google-auth reads the metadata server's address when it is imported.)
    """
    import json
    import subprocess
    import sys

    from litdata_io import get_storage
    from tests.support.cred_harness import clean_environment
    from tests.support.cred_servers import Authority, BearerChecker, CredentialServer

    authority = Authority()
    bucket = fake_gcs.create_bucket()
    seed = get_storage(f"gs://{bucket}", {**fake_gcs.gcsfs_options(), "backend": "fsspec"})
    seed.put("data/a.bin", b"first")
    seed.put("data/b.bin", b"second")
    env = clean_environment(tmp_path / "home")  # no gcloud login: google-auth goes on to the metadata server
    with CredentialServer(authority) as tokens, BearerChecker(fake_gcs.endpoint, authority, "gcs") as checker:
        host = tokens.endpoint.split("://", 1)[1]
        env.update(GCE_METADATA_HOST=host, GCE_METADATA_IP=host)
        options = {"backend": "fsspec", "endpoint_url": checker.endpoint, "token": "google_default"}
        reader = subprocess.Popen(
            [sys.executable, "-c", _FSSPEC_READER, f"gs://{bucket}/data", json.dumps(options)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert reader.stdin is not None and reader.stdout is not None
        first = reader.stdout.readline().strip()
        assert authority.revoke() >= 1  # the token the filesystem holds, advertised for an hour
        out, err = reader.communicate("go\n", timeout=300)
    assert reader.returncode == 0 and [first, out.strip()] == ["first", "second"], err[-3000:]
    issued, verdicts = authority.counts("")
    assert issued == {"gce": 2}, issued  # once at start, once after the refusal
    assert verdicts.get("ok:gcs:gce", 0) >= 2 and len(verdicts) == 2, verdicts  # and the one refusal
