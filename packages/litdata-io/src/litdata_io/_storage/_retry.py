"""Retries with exponential backoff and jitter, bounded by a count and a deadline.

This is the only layer that retries: the obstore backend turns obstore's own retries off
(``retry_config={"max_retries": 0}``), so one request is attempted at most
``1 + max_retries`` times and no retry starts later than ``retry_deadline`` seconds after the
first attempt. Only transient failures (5xx, 408/429 throttling, ``SlowDown``, connection resets,
timeouts) are retried; a missing object or any other client error fails at once.

A request the server refused for its credentials or signature (401, 403, S3's ``ExpiredToken`` or
``RequestTimeTooSkewed``, a HEAD's 400) is tried once more, after :data:`SIGN_AGAIN_AFTER_S`, within
the same budget: the caller's ``renew`` drops the client that signed it, so the next attempt signs
with keys fetched anew (the keys may have been revoked early, or the request signed before its
process was paused past their expiry). A second refusal is final.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from litdata_io._processes._process import PerProcess
from litdata_io._storage._failures import ErrorKind, classify, refused_signature, short_cause, translate
from litdata_io._storage._secret import Secret
from litdata_io._storage._settings import IOSettings

__all__ = ["SIGN_AGAIN_AFTER_S", "backoff_delay", "retry_call", "retry_with_client"]

# A refused signature is signed again after this pause, not at once: a credential source that just
# rotated its keys, or a server that just revoked them, is given a moment to agree with itself.
SIGN_AGAIN_AFTER_S = 0.25

T = TypeVar("T")
log = logging.getLogger("litdata_io")


def backoff_delay(attempt: int, settings: IOSettings, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): uniform in [cap/10, cap], cap doubling."""
    cap = min(settings.backoff_max, settings.backoff_base * (2 ** (attempt - 1)))
    return (rng or random).uniform(cap / 10, cap)


async def retry_call(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    url: str,
    settings: IOSettings,
    secrets: Iterable[Secret | str] = (),
    attempt_timeout: float | None = None,
    renew: Callable[[], None] | None = None,
) -> T:
    """Await ``call()`` (a fresh attempt each time) until it succeeds, retrying transient failures.

    ``settings`` is the retry budget; ``what`` (the operation), ``url`` and ``secrets`` (masked) are
    for messages; an attempt longer than ``attempt_timeout`` s is a transient failure; ``renew`` is
    called before the one attempt more a refused signature gets.

    Raises:
        FileNotFoundError: the object does not exist.
        PermissionError: the credentials do not allow the operation.
        StorageError: a permanent failure, or the budget ran out on transient ones.
    """
    started = time.monotonic()
    attempt = 0
    signed_again = False  # a refused signature is tried once more (see the module docstring)
    while True:
        attempt += 1
        try:
            if attempt_timeout is None:
                return await call()
            return await asyncio.wait_for(call(), attempt_timeout)
        except Exception as exc:
            kind = ErrorKind.TRANSIENT if isinstance(exc, asyncio.TimeoutError) else classify(exc)
            elapsed = time.monotonic() - started
            if (
                not signed_again
                and settings.allows_retry(attempt, elapsed, SIGN_AGAIN_AFTER_S)
                and refused_signature(exc, what)
            ):
                signed_again = True
                log.debug("%s %s: refused (%s); signing it again with new keys", what, url, short_cause(exc, secrets))
                if renew is not None:
                    renew()
                await asyncio.sleep(SIGN_AGAIN_AFTER_S)
                continue
            delay = backoff_delay(attempt, settings)
            if kind is not ErrorKind.TRANSIENT or not settings.allows_retry(attempt, elapsed, delay):
                error = translate(
                    exc,
                    what=what,
                    url=url,
                    kind=kind,
                    attempts=attempt,
                    elapsed=elapsed,
                    budget=settings.budget(),
                    secrets=secrets,
                )
                if error is exc:
                    raise
                # Chain the backend's exception for debugging unless its text would leak a secret.
                cause = exc if short_cause(exc, secrets) == short_cause(exc) else None
                raise error from cause
            log.debug(
                "%s %s: attempt %d failed (%s); retrying in %.2fs", what, url, attempt, short_cause(exc, secrets), delay
            )
            await asyncio.sleep(delay)


async def retry_with_client(
    clients: PerProcess[Any], build: Callable[[], Any], call: Callable[[], Awaitable[T]], **options: Any
) -> T:
    """:func:`retry_call` (given ``options``) of ``call``, which uses the client in ``clients``.

    When the server refuses the keys, the client the attempt used is dropped, so the next attempt
    builds one (``build``) that asks the keys' source again.
    """
    used: list[Any] = [None]

    async def attempt() -> T:
        used[0] = clients.get(build)
        return await call()

    def renew() -> None:
        if clients.peek() is used[0]:
            clients.clear()

    return await retry_call(attempt, renew=renew, **options)
