"""Our SigV4 signer against botocore's (an independent implementation of the same AWS spec)."""

from __future__ import annotations

import datetime

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from litdata_io._sigv4 import UNSIGNED_PAYLOAD, encode_path, sign_v4


@pytest.mark.parametrize(
    ("method", "path", "query", "extra", "token"),
    [
        ("GET", "/bucket/dir/chunk-0.bin", {}, {"range": "bytes=0-99"}, None),
        ("PUT", "/bucket/a key with spaces+plus.bin", {}, {"content-length": "3"}, "session-token"),
        ("GET", "/bucket", {"list-type": "2", "prefix": "data/a b", "delimiter": "/"}, {}, None),
        ("HEAD", "/bucket/ünïcode/é.bin", {}, {}, None),
    ],
)
def test_matches_botocore(
    method: str, path: str, query: dict[str, str], extra: dict[str, str], token: str | None
) -> None:
    host = "127.0.0.1:9000"
    url = f"http://{host}{encode_path(path)}"
    if query:
        url += "?" + "&".join(f"{k}={v.replace(' ', '%20').replace('/', '%2F')}" for k, v in query.items())
    request = AWSRequest(method=method, url=url, headers={**extra, "x-amz-content-sha256": UNSIGNED_PAYLOAD})
    S3SigV4Auth(
        Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token), "s3", "eu-west-1"
    ).add_auth(request)
    stamp = request.headers["X-Amz-Date"]
    now = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    ours = sign_v4(
        method,
        path,
        query,
        {"host": host, **extra},
        access_key="AKIDEXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        session_token=token,
        region="eu-west-1",
        now=now,
        payload_hash=request.headers["X-Amz-Content-SHA256"],  # botocore hashes payloads over http
    )
    assert ours["Authorization"] == request.headers["Authorization"]
    assert ours["x-amz-date"] == stamp
