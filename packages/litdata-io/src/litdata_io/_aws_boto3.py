"""AWS credentials that only boto3 resolves (assume-role, SSO, ``credential_process`` profiles), for obstore.

Importing this module imports boto3: :mod:`litdata_io._aws_config` imports it only when a profile
needs it, and turns the ImportError into an install hint.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import boto3  # pyright: ignore[reportMissingTypeStubs]
import botocore.exceptions  # pyright: ignore[reportMissingTypeStubs]
from obstore.auth.boto3 import Boto3CredentialProvider

if TYPE_CHECKING:
    from obstore.store import S3Credential

__all__ = ["boto3_provider", "obstore_expiry"]


def obstore_expiry(expiry: object) -> dt.datetime | None:
    """``expiry`` as obstore takes it: an aware datetime in ``datetime.timezone.utc`` (None: unknown).

    obstore accepts no other tzinfo, not even another UTC one: botocore's ``tzlocal()`` or
    ``tzutc()``, or ``ZoneInfo("UTC")``, fail every request with ``ValueError: expected
    datetime.timezone.utc``. A naive datetime has no meaning here, so it counts as unknown.

    Args:
        expiry: what botocore keeps as the credentials' expiry (a datetime, or None).
    """
    if not isinstance(expiry, dt.datetime) or expiry.tzinfo is None or expiry.utcoffset() is None:
        return None
    return expiry.astimezone(dt.timezone.utc)


class _Provider(Boto3CredentialProvider):
    """obstore's boto3 provider, telling obstore when the credentials really expire.

    obstore's own reports every answer as valid for a fixed ``ttl`` (30 minutes), longer than
    temporary credentials may live. obstore calls the provider again when less than 5 minutes of
    the expiry it was told are left; botocore refreshes refreshable credentials (assume-role, SSO,
    ``credential_process`` with an ``Expiration``, container credentials) when less than 10-15
    minutes are left, so that call returns new keys.
    """

    def __call__(self) -> S3Credential:
        frozen: Any = self.credentials.get_frozen_credentials()  # botocore ships no types
        # botocore keeps a refreshable credential's expiry only in this attribute; it belongs to the
        # keys just frozen because only this provider uses the session, and obstore calls it under a lock
        expiry = obstore_expiry(getattr(self.credentials, "_expiry_time", None))
        told = dt.datetime.now(dt.timezone.utc) + self.ttl
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            # an empty token would be sent as an empty x-amz-security-token header, which S3 refuses
            "token": frozen.token or None,
            "expires_at": told if expiry is None else min(told, expiry),
        }


def boto3_provider(profile: str | None, why: str, region: str | None) -> Boto3CredentialProvider:
    """A credential provider for obstore's S3Store from boto3's chain for ``profile`` (None: the default chain).

    Args:
        profile: the AWS profile name.
        why: what made boto3 necessary, for the error message.
        region: the bucket's region, for boto3's STS client when the profile names none (boto3
            reads ``AWS_DEFAULT_REGION`` but not ``AWS_REGION``).

    Raises:
        ValueError: boto3 cannot resolve the profile's credentials.
    """
    try:
        session = boto3.Session(profile_name=profile)
        # boto3 ships no types: the region is a str or None.
        if session.region_name is None and region:  # pyright: ignore[reportUnknownMemberType]
            session = boto3.Session(profile_name=profile, region_name=region)
        return _Provider(session)
    except (botocore.exceptions.BotoCoreError, ValueError) as exc:
        where = f"AWS profile {profile!r}" if profile else "AWS credentials"
        raise ValueError(f"{where}: {why}, and boto3 cannot resolve it: {exc}") from None
