"""AWS credentials that only boto3 resolves (assume-role, SSO, ``credential_process`` profiles), for obstore.

Importing this module imports boto3: :mod:`litdata_io._storage._aws_config` imports it only when a profile
needs it, and turns the ImportError into an install hint.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from typing import TYPE_CHECKING, Any

import boto3  # pyright: ignore[reportMissingTypeStubs]
import botocore.exceptions  # pyright: ignore[reportMissingTypeStubs]
import botocore.parsers  # pyright: ignore[reportMissingTypeStubs]
from obstore.auth.boto3 import Boto3CredentialProvider

from litdata_io._storage._retry import backoff_delay
from litdata_io._storage._settings import IOSettings

if TYPE_CHECKING:
    from obstore.store import S3Credential

__all__ = ["boto3_provider", "is_transient_refresh_error", "obstore_expiry"]

log = logging.getLogger("litdata_io")


def obstore_expiry(expiry: object) -> dt.datetime | None:
    """``expiry`` as obstore takes it: an aware datetime in ``datetime.timezone.utc`` (None: unknown).

    obstore fails every request given another tzinfo, even another UTC one (botocore's ``tzutc()``);
    a naive datetime counts as unknown.
    """
    if not isinstance(expiry, dt.datetime) or expiry.tzinfo is None or expiry.utcoffset() is None:
        return None
    return expiry.astimezone(dt.timezone.utc)


class _Provider(Boto3CredentialProvider):
    """obstore's boto3 provider, telling obstore when the credentials really expire, retrying refreshes.

    obstore's own reports every answer as valid for 30 minutes, longer than temporary credentials
    may live. A refresh that fails transiently is retried under the storage's retry policy, serving
    the keys from before while they are valid (with one warning); a permanent refusal fails at once.
    """

    def __init__(self, session: Any, where: str, settings: IOSettings) -> None:
        super().__init__(session)
        self._where = where
        self._settings = settings
        self._last: tuple[S3Credential, dt.datetime | None] | None = None  # keys, their real expiry
        self._failures = 0  # refreshes failed in a row while serving the keys from before
        self._warned = False

    def _fetch(self) -> tuple[S3Credential, dt.datetime | None]:
        frozen: Any = self.credentials.get_frozen_credentials()  # botocore ships no types
        # botocore keeps a refreshable credential's expiry only in this attribute; it belongs to the
        # keys just frozen because only this provider uses the session, and obstore calls it under a lock
        expiry = obstore_expiry(getattr(self.credentials, "_expiry_time", None))
        told = dt.datetime.now(dt.timezone.utc) + self.ttl
        credential: S3Credential = {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            # an empty token would be sent as an empty x-amz-security-token header, which S3 refuses
            "token": frozen.token or None,
            "expires_at": told if expiry is None else min(told, expiry),
        }
        return credential, expiry

    def __call__(self) -> S3Credential:
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                credential, expiry = self._fetch()
            except Exception as exc:
                transient = is_transient_refresh_error(exc)
                delay = backoff_delay(self._failures + attempt, self._settings)
                stale = self._stale(delay) if transient else None
                if stale is not None:
                    return stale
                elapsed = time.monotonic() - started
                settings = self._settings
                if not transient or not settings.allows_retry(attempt, elapsed, delay):
                    kind = "transient" if transient else "permanent"
                    raise PermissionError(
                        f"{self._where}: boto3 could not get new keys ({kind} failure, {attempt} attempt(s) in "
                        f"{elapsed:.1f}s; {self._settings.budget()}): {type(exc).__name__}: {exc}"
                    ) from exc
                log.debug("%s: refreshing keys failed (%s); retrying in %.2fs", self._where, exc, delay)
                time.sleep(delay)
                continue
            if self._failures:
                log.info("%s: new keys after %d failed refreshes", self._where, self._failures)
            self._failures = 0
            self._last = (credential, expiry)
            return credential

    def _stale(self, delay: float) -> S3Credential | None:
        """The keys from before, if still valid a while after ``delay``; obstore asks again after ``delay``."""
        if self._last is None:
            return None
        credential, expiry = self._last
        if expiry is None:  # keys without an expiry were not refreshed by botocore
            return None
        now = dt.datetime.now(dt.timezone.utc)
        retry_at = now + dt.timedelta(seconds=delay)
        if expiry - retry_at < _STALE_MARGIN:
            return None
        self._failures += 1
        if not self._warned:
            self._warned = True
            log.warning(
                "%s: refreshing the keys failed; using the current ones (valid until %s) and trying again",
                self._where,
                expiry.isoformat(timespec="seconds"),
            )
        # obstore asks again when less than its 5 minutes are left of what it is told
        return {**credential, "expires_at": retry_at + _OBSTORE_MIN_TTL}


def is_transient_refresh_error(exc: BaseException) -> bool:
    """Whether a failed credential refresh may succeed when tried again.

    Transient: no connection, a timeout, a 5xx or throttling answer, a proxy's error page, a failed
    ``credential_process``, a container endpoint answering 5xx or not at all. Permanent: the rest.
    """
    if isinstance(exc, (OSError, botocore.exceptions.HTTPClientError)):
        return True  # connection refused/reset, timeouts (botocore's are HTTPClientErrors)
    if isinstance(exc, botocore.parsers.ResponseParserError):
        return True  # an answer that is not the service's (a proxy's or load balancer's error page)
    if isinstance(exc, botocore.exceptions.ClientError):
        response: Any = getattr(exc, "response", None) or {}  # botocore ships no types
        metadata: dict[str, Any] = response.get("ResponseMetadata") or {}
        error: dict[str, Any] = response.get("Error") or {}
        status = int(metadata.get("HTTPStatusCode") or 0)
        code = str(error.get("Code") or "")
        return status >= 500 or status == 429 or code in _THROTTLING or "Throttl" in code
    if isinstance(exc, (botocore.exceptions.CredentialRetrievalError, botocore.exceptions.MetadataRetrievalError)):
        refused = _REFUSED.search(str(exc))  # the container endpoint's answer, if it gave one
        return refused is None or refused.group(1) in ("408", "429")
    return False


_STALE_MARGIN = dt.timedelta(seconds=5)  # a request signed just before the expiry still arrives in time
_OBSTORE_MIN_TTL = dt.timedelta(minutes=5)
_THROTTLING = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "SlowDown"}
_REFUSED = re.compile(r"non 200 response (4\d\d)")


def boto3_provider(
    profile: str | None, why: str, region: str | None, settings: IOSettings | None = None
) -> Boto3CredentialProvider:
    """A credential provider for obstore's S3Store from boto3's chain for ``profile`` (None: the default chain).

    ``why`` made boto3 necessary (for messages); ``region`` is for boto3's STS client when the
    profile names none (boto3 does not read ``AWS_REGION``); ``settings`` retry failed refreshes.
    A ValueError when boto3 cannot resolve the profile's credentials.
    """
    where = f"AWS profile {profile!r}" if profile else f"AWS credentials ({why})"
    try:
        session = boto3.Session(profile_name=profile)
        # boto3 ships no types: the region is a str or None.
        if session.region_name is None and region:  # pyright: ignore[reportUnknownMemberType]
            session = boto3.Session(profile_name=profile, region_name=region)
        return _Provider(session, where, settings or IOSettings())
    except (botocore.exceptions.BotoCoreError, ValueError) as exc:
        named = f"AWS profile {profile!r}" if profile else "AWS credentials"
        raise ValueError(f"{named}: {why}, and boto3 cannot resolve it: {exc}") from None
