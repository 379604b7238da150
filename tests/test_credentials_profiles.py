"""AWS credential sources in every kind of process litdata runs, against a bucket that checks
signatures: the profiles resolved through boto3 (credential_process, SSO with a session and the
legacy form) and a profile whose bucket sits behind a private CA (ca_bundle). How a source is
driven is in ``tests/support/cred_suite.py``; the other sources are in ``tests/test_credentials.py``.
"""

from __future__ import annotations

import pytest

from tests.support.cred_suite import group_tests

pytestmark = pytest.mark.cloud

GROUP = ("credential-process-profile", "sso-session-profile", "sso-legacy-profile", "ca-bundle-profile")


test_source_in_every_process, test_source_hands_out_keys = group_tests(GROUP)
