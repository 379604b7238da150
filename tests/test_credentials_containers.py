"""AWS credential sources in every kind of process litdata runs, against a bucket that checks
signatures: the container credential endpoints (full URI with and without a token, the relative
URI in a network namespace of its own) and an assume-role profile. How a source is driven is in
``tests/cred_suite.py``; the other sources are in ``tests/test_credentials.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.cred_suite import ALL, check_source_hands_out_keys, check_source_in_phase

pytestmark = pytest.mark.cloud

GROUP = ("assume-role-profile", "container-full-uri", "container-full-uri-no-token", "container-relative-uri")


@pytest.mark.parametrize(("source", "phase"), [(source, phase) for source in GROUP for phase in ALL])
def test_source_in_every_process(
    aws_stack: dict[str, Any], aws_drive: Callable[[str], dict[str, Any]], source: str, phase: str
) -> None:
    check_source_in_phase(aws_stack, aws_drive, source, phase)


def test_source_hands_out_keys(aws_stack: dict[str, Any], aws_drive: Callable[[str], dict[str, Any]]) -> None:
    check_source_hands_out_keys(aws_stack, aws_drive, GROUP)
