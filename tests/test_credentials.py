"""Every AWS credential source, in every kind of process litdata runs, against a bucket that checks
signatures: instance metadata, web identity and a static profile here, plus keys that expire
mid-epoch. The other sources are in ``tests/test_credentials_containers.py`` and
``tests/test_credentials_profiles.py``; how a source is driven is in ``tests/support/cred_suite.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripts.credential_source import N
from tests.support.cred_servers import MIN_TTL
from tests.support.cred_suite import drive_source, group_tests

pytestmark = pytest.mark.cloud

GROUP = ("imds", "web-identity", "static-profile")


test_source_in_every_process, test_source_hands_out_keys = group_tests(GROUP)


def test_credentials_expiring_mid_epoch_are_refreshed(aws_stack: dict[str, Any]) -> None:
    """IMDS hands out keys that obstore should replace after a second (5 minutes + 1 s left) and the
    checker refuses three seconds after issue; an epoch of several seconds over 2 workers still
    sees every sample, and more than one key was issued."""
    authority = aws_stack["stack"].authority
    authority.reset(lifetime=MIN_TTL + 1, accept_for=3)
    try:
        result = drive_source(aws_stack, "imds", ("raw-slow",))["raw-slow"]
    finally:
        authority.reset()
    assert result["error"] is None, result["error"]
    assert sorted(result["samples"]) == list(range(N))
    issued, verdicts = authority.counts("imds/raw-slow")
    print("raw-slow", result["seconds"], "s, keys issued:", issued, "verdicts:", verdicts)
    assert {verdict for verdict in verdicts} == {"ok:s3:imds"}, verdicts
    assert issued["imds"] > 3  # each process refreshed, more than once


def test_the_three_files_cover_every_source() -> None:
    """The split of the sources over the three files drops none."""
    from tests.support.cred_suite import SOURCES
    from tests.test_credentials_containers import GROUP as CONTAINERS
    from tests.test_credentials_profiles import GROUP as PROFILES

    assert sorted(GROUP + CONTAINERS + PROFILES) == sorted(SOURCES)
