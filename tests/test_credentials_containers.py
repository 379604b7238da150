"""AWS credential sources in every kind of process litdata runs, against a bucket that checks
signatures: the container credential endpoints (full URI with and without a token, the relative
URI in a network namespace of its own) and an assume-role profile. How a source is driven is in
``tests/support/cred_suite.py``; the other sources are in ``tests/test_credentials.py``.
"""

from __future__ import annotations

import pytest

from tests.support.cred_suite import group_tests

pytestmark = pytest.mark.cloud

GROUP = ("assume-role-profile", "container-full-uri", "container-full-uri-no-token", "container-relative-uri")


test_source_in_every_process, test_source_hands_out_keys = group_tests(GROUP)
