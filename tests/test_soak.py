"""The soak test of issue 26: a real multi-rank job over a faulty bucket, killed, stopped and resumed.

What one round does and checks is in ``tests/support/soak.py``; the long mode is
``uv run python -m benchmarks.soak --minutes 30``. The ``ci`` round runs every part at once:
ranks from ``GLOBAL_RANK``, keys from a ``credential_process`` profile that expire and are revoked
every 5 s, a SIGKILLed worker, a SIGSTOPped downloader, a resume in fresh processes, and two
``optimize`` jobs into one bucket output at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.servers import S3Server
from tests.support.soak import SoakConfig, run_soak

pytestmark = [pytest.mark.soak, pytest.mark.cloud, pytest.mark.distributed, pytest.mark.slow]

ROUNDS = [
    # Everything at once: env ranks that say their rank only as GLOBAL_RANK (+ NNODES, as upstream
    # reads it), expiring keys from a boto3-resolved source (a credential_process profile), and a
    # downloader SIGSTOPped while it holds a chunk others wait for (taken over after 15 s, well
    # under the watchdog's limit).
    pytest.param(
        SoakConfig(
            rank_variable="GLOBAL_RANK",
            keys="credential-process",
            # Refused 11 s after issue (not 4): under two test workers on 2 cores a rank can sign a
            # request with a key fetched seconds earlier; the keys still turn over many times a round.
            key_grace_s=10.0,
            stop_downloader=True,
            # Stopped until every process that waited on its locks was released by a takeover, 30 s
            # at the soonest (75 s at most): the stopped process then sends requests it signed
            # before its stop with keys refused by now, which litdata signs again (late arrivals).
            stop_min_s=30.0,
            extra_env={"LITDATA_DOWNLOAD_STALL_S": "15"},
            # every key revoked every 5 s (the bucket answers 403 InvalidAccessKeyId): new keys are
            # fetched from the credential_process on the refusal (issue 51). Keys live ~1 s, so a
            # revocation hits only requests signed just before it: at every 20 s, a 60 s round on a quiet
            # machine once saw no refused request at all.
            revoke_every_s=5.0,
            # two optimize jobs into one bucket output at once, during the streaming (issue 51)
            optimize_jobs=2,
        ),
        id="ci",
    ),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("config", ROUNDS)
def test_soak(config: SoakConfig, s3_server: S3Server, tmp_path: Path) -> None:
    report = run_soak(config, s3_server, tmp_path)
    print(report.summary())
    print(
        "CPython's pymp-* folders of torn-down ranks (tolerated, see SoakConfig.allow_killed_leftovers):",
        report.known_leftovers,
    )
    problems = report.problems()
    assert not problems, "\n".join(problems)
    # the round did what it says: faults hit, a worker died, keys were refreshed
    assert report.faults.get("pass", 0) > 0 and {"reset", "503", "stall"} <= set(report.faults), report.faults
    assert report.killed_worker, "no DataLoader worker was killed"
    if config.revoke_every_s:  # revoked keys were refused, and the ranks carried on with new ones
        assert any(entry[1] == "revoked key" for entry in report.refusals), report.summary()
    if config.stop_downloader:
        # someone needed what the stopped process held (and, by the checks above, got it in time)
        assert report.stopped.get("blocked_on_its_locks"), f"nobody waited for the stopped process: {report.stopped}"
