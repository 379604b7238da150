"""Error classification, translation, redaction and the retry loop (with real failing coroutines)."""

from __future__ import annotations

import asyncio
import errno
import http.client
import random
from collections.abc import Awaitable, Callable

import pytest

from litdata_io import StorageError
from litdata_io._storage._failures import ErrorKind, classify, translate
from litdata_io._storage._retry import backoff_delay, retry_call
from litdata_io._storage._secret import Secret, redact
from litdata_io._storage._settings import IOSettings

FAST = IOSettings(max_retries=3, backoff_base=0.001, backoff_max=0.002)


class _StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class UnauthenticatedError(Exception):
    """Named as obstore's: a credential provider's failure reaches the caller as one."""


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (FileNotFoundError("x"), ErrorKind.NOT_FOUND),
        (PermissionError("x"), ErrorKind.DENIED),
        (ConnectionResetError(), ErrorKind.TRANSIENT),
        (TimeoutError(), ErrorKind.TRANSIENT),
        (http.client.IncompleteRead(b"", 10), ErrorKind.TRANSIENT),
        (OSError(errno.ECONNRESET, "reset"), ErrorKind.TRANSIENT),
        (OSError(errno.ENOSPC, "disk full"), ErrorKind.PERMANENT),
        (_StatusError(503), ErrorKind.TRANSIENT),
        (_StatusError(429), ErrorKind.TRANSIENT),
        (_StatusError(404), ErrorKind.NOT_FOUND),
        (_StatusError(403), ErrorKind.DENIED),
        (_StatusError(401), ErrorKind.DENIED),
        (_StatusError(400), ErrorKind.PERMANENT),
        (_StatusError(501), ErrorKind.PERMANENT),
        (
            RuntimeError("Generic S3 error: Server returned non-2xx status code: 503 Service Unavailable"),
            ErrorKind.TRANSIENT,
        ),
        (RuntimeError("Server returned non-2xx status code: 416 Range Not Satisfiable"), ErrorKind.PERMANENT),
        (RuntimeError("status code: 400 Bad Request: <Code>RequestTimeout</Code>"), ErrorKind.TRANSIENT),
        (RuntimeError("HTTP error: error sending request"), ErrorKind.TRANSIENT),
        (RuntimeError("status code: 400 Bad Request: <Code>ExpiredToken</Code>"), ErrorKind.DENIED),
        (RuntimeError("status code: 403 Forbidden: <Code>RequestTimeTooSkewed</Code>"), ErrorKind.DENIED),
        (RuntimeError("<Error><Code>SlowDown</Code></Error>"), ErrorKind.TRANSIENT),
        (ValueError("bad argument"), ErrorKind.PERMANENT),
    ],
)
def test_classify(exc: BaseException, kind: ErrorKind) -> None:
    assert classify(exc) is kind


def test_translate_names_url_and_cause() -> None:
    missing = translate(RuntimeError("status 404"), what="GET", url="s3://b/k")
    assert isinstance(missing, FileNotFoundError) and "GET s3://b/k: no such object" in str(missing)
    denied = translate(_StatusError(403), what="PUT", url="s3://b/k")
    assert isinstance(denied, PermissionError) and "s3://b/k" in str(denied) and "credentials" in str(denied)
    moved = translate(RuntimeError("status code: 301 <Code>PermanentRedirect</Code>"), what="GET", url="s3://b/k")
    assert isinstance(moved, StorageError) and "region_name" in str(moved)


def test_redact_masks_known_values_and_signed_urls() -> None:
    text = "GET https://h/b/k?X-Amz-Signature=abcdef&sig=zzz&sv=2020 with key hunter22 failed"
    masked = redact(text, [Secret("hunter22")])
    assert "abcdef" not in masked and "zzz" not in masked and "hunter22" not in masked
    assert "sv=2020" in masked


def test_backoff_grows_and_is_capped() -> None:
    settings = IOSettings(backoff_base=0.1, backoff_max=1.0)
    rng = random.Random(0)
    for attempt, cap in ((1, 0.1), (2, 0.2), (3, 0.4), (10, 1.0)):
        delays = [backoff_delay(attempt, settings, rng) for _ in range(50)]
        assert all(cap / 10 <= delay <= cap for delay in delays)


def _flaky(failures: list[BaseException], result: str = "done") -> tuple[list[int], Callable[[], Awaitable[str]]]:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return result

    return calls, attempt


def test_retry_until_success() -> None:
    calls, attempt = _flaky([ConnectionResetError(), _StatusError(503), TimeoutError()])
    assert asyncio.run(retry_call(attempt, what="GET", url="s3://b/k", settings=FAST)) == "done"
    assert len(calls) == 4


def test_permanent_errors_fail_at_once() -> None:
    for first in (_StatusError(404), _StatusError(400), ValueError("bad argument")):
        calls, attempt = _flaky([first, ConnectionResetError()])
        with pytest.raises((FileNotFoundError, StorageError)):
            asyncio.run(retry_call(attempt, what="GET", url="s3://b/k", settings=FAST))
        assert len(calls) == 1


def test_refused_signature_is_signed_again_once() -> None:
    """A 401/403 or a stale-key code gets one more attempt (signed anew, see _retry); a second refusal is final."""
    for refusal in (
        _StatusError(403),
        _StatusError(401),
        RuntimeError("Server returned non-2xx status code: 400 Bad Request: <Code>ExpiredToken</Code>"),
    ):
        calls, attempt = _flaky([refusal])
        assert asyncio.run(retry_call(attempt, what="GET", url="s3://b/k", settings=FAST)) == "done"
        assert len(calls) == 2
        calls, attempt = _flaky([refusal, refusal, ConnectionResetError()])
        with pytest.raises(PermissionError, match="s3://b/k"):
            asyncio.run(retry_call(attempt, what="GET", url="s3://b/k", settings=FAST))
        assert len(calls) == 2
    # no retries asked for: one attempt; a credential source's refusal is not a refused signature
    calls, attempt = _flaky([_StatusError(403)])
    with pytest.raises(PermissionError):
        asyncio.run(retry_call(attempt, what="GET", url="u", settings=IOSettings(max_retries=0)))
    assert len(calls) == 1
    source = UnauthenticatedError("lacked valid authentication credentials for path External AWS credential provider")
    calls, attempt = _flaky([source])
    with pytest.raises(PermissionError):
        asyncio.run(retry_call(attempt, what="GET", url="u", settings=FAST))
    assert len(calls) == 1


def test_budget_runs_out_with_one_clear_error() -> None:
    calls, attempt = _flaky([_StatusError(503)] * 10)
    with pytest.raises(StorageError) as info:
        asyncio.run(retry_call(attempt, what="GET", url="s3://b/k", settings=FAST))
    assert len(calls) == 4 and info.value.attempts == 4
    assert "4 attempts" in str(info.value) and "max_retries=3" in str(info.value)


def test_attempt_timeout_counts_as_transient() -> None:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(10)
        return "second"

    result = asyncio.run(retry_call(attempt, what="GET", url="u", settings=FAST, attempt_timeout=0.05))
    assert result == "second" and len(calls) == 2


def test_secret_in_a_backend_message_is_masked_and_not_chained() -> None:
    _, attempt = _flaky([RuntimeError("status 400: signature for key hunter22 did not match")])
    with pytest.raises(StorageError) as info:
        asyncio.run(retry_call(attempt, what="GET", url="u", settings=FAST, secrets=[Secret("hunter22")]))
    assert "hunter22" not in str(info.value) and info.value.__cause__ is None


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="timeout"):
        IOSettings(timeout=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        IOSettings(max_concurrency=0)
    assert (
        IOSettings.from_options({"part_size": "4MiB", "max_concurrency": "3"}, environ={}).part_size == 4 * 1024 * 1024
    )
