"""Storage errors: what a backend failure means (missing, denied, worth retrying) and how it is told.

Every backend raises its own exception types (obstore's ``GenericError`` with the HTTP status in
its text, aiohttp's ``ClientResponseError``, ``huggingface_hub``'s ``HfHubHTTPError``, plain
``OSError``). :func:`classify` sorts any of them into one of four kinds and :func:`translate`
turns a final failure into the error the caller sees: ``FileNotFoundError`` (404),
``PermissionError`` (401/403) or :class:`StorageError`, each naming the URL, the operation and
the cause with secrets masked.
"""

from __future__ import annotations

import enum
import errno
import re
from collections.abc import Iterable

from litdata_io._storage._secret import Secret, redact

__all__ = [
    "ErrorKind",
    "ReadOnlyStorageError",
    "StorageError",
    "classify",
    "refused_signature",
    "short_cause",
    "translate",
]


class StorageError(OSError):
    """A storage operation failed for a reason other than a missing object or denied access.

    Attributes:
        url: the object or prefix the operation was about.
        attempts: how many times the operation was tried.
    """

    def __init__(self, message: str, *, url: str = "", attempts: int = 1) -> None:
        super().__init__(message)
        self.url = url
        self.attempts = attempts

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __reduce__(self):  # type: ignore[no-untyped-def]  # keep the keyword attributes through pickling
        return (_rebuild_storage_error, (type(self), str(self), self.url, self.attempts))


def _rebuild_storage_error(cls: type[StorageError], message: str, url: str, attempts: int) -> StorageError:
    return cls(message, url=url, attempts=attempts)


class ReadOnlyStorageError(PermissionError):
    """A write (put, upload, delete, copy) was asked of a read-only storage (``http(s)://``, ``hf://``)."""


class ErrorKind(enum.Enum):
    """What a failure means for the caller."""

    NOT_FOUND = "not found"
    DENIED = "denied"
    TRANSIENT = "transient"
    PERMANENT = "permanent"


_STATUS = re.compile(r"status(?: code)?[:= ]+(\d{3})\b", re.IGNORECASE)
# Error codes S3-compatible stores put in a response body for throttling and server trouble; some
# come with status 400 (RequestTimeout) or 200 (a CompleteMultipartUpload that failed late).
_TRANSIENT_CODES = re.compile(
    r"SlowDown|Throttl|TooManyRequests|RequestTimeout|InternalError|ServiceUnavailable|"
    r"RequestLimitExceeded|ServerBusy|OperationTimedOut",
)
# Codes and texts of a request refused for when it was signed, not for what it asks: S3 answers a
# session token used after its expiry 400 ExpiredToken, and a signature older than 15 minutes 403
# RequestTimeTooSkewed; GCS and Azure answer an expired bearer token 401.
_STALE_SIGNATURE = re.compile(
    r"ExpiredToken|TokenRefreshRequired|RequestTimeTooSkewed|RequestExpired|token (?:has|is) expired",
    re.IGNORECASE,
)
_TRANSIENT_TEXT = re.compile(
    r"timed out|timeout|connection reset|reset by peer|connection closed|connection refused|broken pipe|"
    r"error sending request|error decoding response body|unexpected (?:end of file|eof)|incomplete|"
    r"connection aborted|dns error|temporarily unavailable|body write aborted|request or response body error|"
    r"server disconnected|end of stream",
    re.IGNORECASE,
)
_TRANSIENT_ERRNOS = {
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.ECONNREFUSED,
    errno.EPIPE,
    errno.ETIMEDOUT,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ENETDOWN,
    errno.EAGAIN,
}


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries, from an attribute or from its text."""
    for holder in (exc, getattr(exc, "response", None)):
        for name in ("status", "status_code", "code"):
            value = getattr(holder, name, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    match = _STATUS.search(str(exc))
    return int(match.group(1)) if match else None


def _kind_of_status(status: int, text: str) -> ErrorKind:
    if status == 404:
        return ErrorKind.NOT_FOUND
    if status in (401, 403):
        return ErrorKind.DENIED
    if status in (408, 429) or (status >= 500 and status != 501):
        return ErrorKind.TRANSIENT
    if _TRANSIENT_CODES.search(text):
        return ErrorKind.TRANSIENT
    return ErrorKind.PERMANENT


def classify(exc: BaseException) -> ErrorKind:
    """Sort a backend exception into an :class:`ErrorKind`."""
    if isinstance(exc, (StorageError, ReadOnlyStorageError)):
        return ErrorKind.PERMANENT
    if isinstance(exc, FileNotFoundError):
        return ErrorKind.NOT_FOUND
    if isinstance(exc, PermissionError):
        return ErrorKind.DENIED
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return ErrorKind.TRANSIENT
    name = type(exc).__name__
    if name in ("PermissionDeniedError", "UnauthenticatedError"):  # obstore's, without importing obstore
        return ErrorKind.DENIED
    if name == "NotFoundError":
        return ErrorKind.NOT_FOUND
    if name in ("IncompleteRead", "RemoteDisconnected", "ServerDisconnectedError", "ClientPayloadError"):
        return ErrorKind.TRANSIENT
    text = str(exc)
    if _STALE_SIGNATURE.search(text):
        return ErrorKind.DENIED
    status = _status_of(exc)
    if status is not None:
        return _kind_of_status(status, text)
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return ErrorKind.TRANSIENT
    if _TRANSIENT_CODES.search(text) or _TRANSIENT_TEXT.search(text):
        return ErrorKind.TRANSIENT
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc and not isinstance(exc, OSError):
        return classify(cause)
    return ErrorKind.PERMANENT


def refused_signature(exc: BaseException, what: str = "") -> bool:
    """Whether the server refused a request for its credentials or signature (401, 403, a stale-key code).

    Signing it again with fresh keys may succeed. A credential source that refused to hand out keys
    (obstore's "credential provider") is not such an answer. S3 answers a HEAD with no body, so its
    400 for an expired session token cannot be told from other 400s: a HEAD's 400 counts as one.
    """
    text = str(exc)
    if "credential provider" in text:
        return False
    status = _status_of(exc)
    return _STALE_SIGNATURE.search(text) is not None or status in (401, 403) or (what == "HEAD" and status == 400)


def short_cause(exc: BaseException, secrets: Iterable[Secret | str] = ()) -> str:
    """A one-paragraph, secret-free description of ``exc`` for an error message."""
    text = str(exc).strip() or type(exc).__name__
    # obstore appends a multi-line Rust debug dump after a blank line; the first part says it all.
    text = text.split("\n\nDebug source:")[0].split("\n\n")[0].strip()
    text = " ".join(text.split())
    if len(text) > 400:
        text = text[:400] + "..."
    return f"{type(exc).__name__}: {redact(text, secrets)}"


def translate(
    exc: BaseException,
    *,
    what: str,
    url: str,
    kind: ErrorKind | None = None,
    attempts: int = 1,
    elapsed: float = 0.0,
    budget: str = "",
    secrets: Iterable[Secret | str] = (),
) -> BaseException:
    """The error to raise for a final failure of ``what`` on ``url``.

    ``kind`` is the failure's kind if already known; ``attempts``, ``elapsed`` and ``budget`` (the
    retry budget in words) say how retries ran out; ``secrets`` are masked in the message.
    """
    secrets = list(secrets)
    kind = kind or classify(exc)
    cause = short_cause(exc, secrets)
    if kind is ErrorKind.NOT_FOUND:
        return FileNotFoundError(errno.ENOENT, f"{what} {url}: no such object ({cause})")
    if kind is ErrorKind.DENIED:
        return PermissionError(
            errno.EACCES,
            f"{what} {url}: access denied ({cause}). Check the credentials (storage_options, session_options or "
            f"the environment) and that they allow {what} on this bucket",
        )
    if isinstance(exc, ReadOnlyStorageError):
        return exc
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return exc  # the local disk written to is full: not the storage's failure, and its errno tells the caller
    if kind is ErrorKind.TRANSIENT:
        message = (
            f"{what} {url} failed after {attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.1f}s: {cause}. "
            f"The retry budget ({budget}) ran out; raise it or check the network and the server"
        )
    else:
        message = f"{what} {url} failed: {cause}"
        if _status_of(exc) == 412:
            message += ". The object changed while it was being downloaded; download it again"
        elif "PermanentRedirect" in cause or _status_of(exc) == 301:
            message += (
                ". The bucket is probably in another region: pass region_name in storage_options or set AWS_REGION"
            )
    return StorageError(message, url=url, attempts=attempts)
