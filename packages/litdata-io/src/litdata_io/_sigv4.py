"""AWS Signature Version 4 for S3 requests, for the pure-Python fallback client.

Written from AWS's published description of SigV4 (canonical request -> string to sign ->
HMAC-SHA256 with a key derived from the secret, the date, the region and the service). Payloads
are sent as ``UNSIGNED-PAYLOAD``, which S3 accepts with header authentication, so a large upload
is never hashed in Python.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import quote

__all__ = ["UNSIGNED_PAYLOAD", "encode_path", "encode_query", "sign_v4"]

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_ALGORITHM = "AWS4-HMAC-SHA256"


def encode_path(path: str) -> str:
    """URI-encode a request path as S3's canonical request wants it (``/`` kept, everything else escaped).

    Args:
        path: the decoded path, e.g. ``/bucket/some key.bin``.
    """
    return quote(path, safe="/-_.~")


def encode_query(query: Mapping[str, str]) -> str:
    """The canonical (sorted, fully escaped) query string.

    Args:
        query: decoded parameter names and values.
    """
    pairs = sorted((quote(name, safe="-_.~"), quote(value, safe="-_.~")) for name, value in query.items())
    return "&".join(f"{name}={value}" for name, value in pairs)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign_v4(
    method: str,
    path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    *,
    access_key: str,
    secret_key: str,
    region: str,
    session_token: str | None = None,
    service: str = "s3",
    payload_hash: str = UNSIGNED_PAYLOAD,
    now: datetime.datetime | None = None,
) -> dict[str, str]:
    """The headers that authenticate a request: ``Authorization``, ``x-amz-date``, ``x-amz-content-sha256``.

    Args:
        method: the HTTP method.
        path: the decoded request path (``/bucket/key``).
        query: the decoded query parameters.
        headers: the headers that will be sent; must include ``host``. All are signed.
        access_key: the access key id.
        secret_key: the secret access key.
        region: the signing region.
        session_token: a temporary credential's token (sent as ``x-amz-security-token``).
        service: the service name in the scope.
        payload_hash: the body's hex SHA-256, or ``UNSIGNED-PAYLOAD``.
        now: the signing time (default: now, UTC).
    """
    moment = (now or datetime.datetime.now(datetime.timezone.utc)).astimezone(datetime.timezone.utc)
    stamp = moment.strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    added = {"x-amz-date": stamp, "x-amz-content-sha256": payload_hash}
    if session_token:
        added["x-amz-security-token"] = session_token
    signed = {name.lower(): " ".join(str(value).split()) for name, value in {**headers, **added}.items()}
    names = sorted(signed)
    canonical = "\n".join(
        [
            method.upper(),
            encode_path(path),
            encode_query(query),
            "".join(f"{name}:{signed[name]}\n" for name in names),
            ";".join(names),
            payload_hash,
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([_ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_key}".encode(), day), region), service), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    added["Authorization"] = (
        f"{_ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return added
