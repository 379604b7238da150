"""A wrapper that keeps credentials out of reprs, logs and error messages.

Credentials from ``storage_options`` are wrapped in :class:`Secret` as soon as they are read.
``repr``/``str`` print ``'***'``; only :meth:`Secret.reveal` gives the value, and it is called at
the one place that hands it to a client. A pickled :class:`Secret` does carry its value: a worker
process needs it to connect. Credentials the worker can find by itself (environment variables,
``~/.aws`` profile files) are never wrapped into a Secret, so they never travel in a pickle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["Secret", "redact"]

_MASK = "***"
# Signed URLs and connection strings carry credentials in query parameters and key=value pairs.
_SECRET_PARAMS = re.compile(
    r"(?i)\b(sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|"
    r"accountkey|sharedaccesssignature|access_token|token)=([^&;\s\"'<>]+)"
)


class Secret:
    """A credential whose ``repr`` is ``'***'``."""

    __slots__ = ("_value",)

    def __init__(self, value: str | Secret) -> None:
        if isinstance(value, Secret):
            value = value.reveal()
        # Typed, yet checked: a credential from a config file may be a number or a dict.
        if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"a credential must be a string, not {type(value).__name__}")
        self._value = value

    def reveal(self) -> str:
        """The secret text (hand it to a client, never to a message)."""
        return self._value

    def __repr__(self) -> str:
        return repr(_MASK)

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        return (Secret, (self._value,))


def redact(text: str, secrets: Iterable[Secret | str] = ()) -> str:
    """``text`` with the given secret values and signed-URL credentials replaced by ``***``."""
    for secret in secrets:
        value = secret.reveal() if isinstance(secret, Secret) else secret
        if value and len(value) >= 4:
            text = text.replace(value, _MASK)
    return _SECRET_PARAMS.sub(lambda m: f"{m.group(1)}={_MASK}", text)
