"""AWS credentials that only boto3 resolves (assume-role, SSO, ``credential_process`` profiles), for obstore.

Importing this module imports boto3: :mod:`litdata_io._aws_config` imports it only when a profile
needs it, and turns the ImportError into an install hint.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3  # pyright: ignore[reportMissingTypeStubs]
import botocore.exceptions  # pyright: ignore[reportMissingTypeStubs]
from obstore.auth.boto3 import Boto3CredentialProvider

__all__ = ["boto3_provider"]


class _Provider(Boto3CredentialProvider):
    """obstore's boto3 provider, telling obstore when the credentials really expire.

    obstore's own reports every answer as valid for a fixed ``ttl`` (30 minutes), longer than
    temporary credentials may live; obstore refreshes 5 minutes before the expiry it is told.
    """

    def __call__(self) -> Any:
        credential = super().__call__()
        # botocore keeps a refreshable credential's expiry only in this attribute; refreshed just now
        expiry = getattr(self.credentials, "_expiry_time", None)
        if isinstance(expiry, dt.datetime) and expiry.tzinfo is not None:
            told = credential["expires_at"]
            credential["expires_at"] = expiry if told is None else min(told, expiry)
        return credential


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
