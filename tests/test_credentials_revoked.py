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
from tests.support.cred_harness import objects, run_driver
from tests.support.expiring_keys import SOURCES, start_expiring_keys
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud

PROCESSES = 3  # the main process and 2 persistent workers
ACCEPTED_S = 1.5
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
