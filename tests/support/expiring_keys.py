"""AWS keys that expire within seconds, and an S3 endpoint that refuses them once they have.

For tests whose jobs must outlive their credentials (tests/test_credentials_expiring.py, the soak
test). moto checks neither signatures nor expiry, so the S3 endpoint handed to litdata is a gate in
front of moto (or of a :class:`~tests.support.fault_proxy.FaultProxy` in front of moto) that forwards only
requests signed, per SigV4, by a key a credential source handed out and that the gate still
accepts; it answers the others as S3 does (400 ``ExpiredToken`` for a key past its time; litdata
signs such a request once more, with the keys it holds then) and keeps them. Every key comes
from one :class:`~tests.support.cred_servers.Authority`, served by the stand-ins of
:mod:`tests.support.cred_servers` as each AWS source hands keys out (IMDS, container endpoints, STS,
SSO, a ``credential_process``).

Two numbers make keys expire on cue:

- ``lifetime``: the ``Expiration`` a key advertises, seconds after issue. obstore asks for new keys
  when less than :data:`~tests.support.cred_servers.MIN_TTL` (300 s) of it is left, and boto3 (the
  profile sources) refreshes when less than 10 minutes are left, so ``MIN_TTL + r`` means
  "replace it after ``r`` seconds".
- ``accept_for``: the gate refuses a key this many seconds after issue; keep it above ``r`` plus
  the longest request, e.g. ``lifetime=MIN_TTL + 1, accept_for=3`` (a test of seconds) or
  ``lifetime=MIN_TTL + 30, accept_for=60`` (keys that expire every minute, for a soak test).

API::

    from tests.support.cred_servers import MIN_TTL
    from tests.support.expiring_keys import start_expiring_keys

    with start_expiring_keys(moto_or_proxy_endpoint, tmp_path, lifetime=MIN_TTL + 1, accept_for=3) as keys:
        env = keys.environment("assume-role-profile")  # the whole environment of a process
        env["WORLD_SIZE"] = "2"  # add your own variables
        keys.mark("epoch-1")  # optional: count what follows under this name
        subprocess.run([...], env=env, check=True)  # the job reads s3://<bucket>/... through the gate
        assert keys.refusals() == []  # no request was refused (a key was used too late)
        assert keys.issued()["assume-role"] > 2  # the processes refreshed their keys

- ``start_expiring_keys(upstream, folder, *, lifetime, accept_for)``: a context manager running the
  stand-ins and the gate; ``upstream`` is moto's endpoint or a proxy's in front of it, ``folder`` a
  scratch folder (profile files, a TLS certificate). Yields :class:`ExpiringKeys`.
- :attr:`ExpiringKeys.endpoint`: the S3 endpoint (the gate), set as ``AWS_ENDPOINT_URL`` by
  :meth:`ExpiringKeys.environment`; any bucket of ``upstream`` is reachable through it.
- :meth:`ExpiringKeys.environment`: a clean environment (no keys, no cloud settings from outside,
  ``HOME`` in ``folder``, ``PYTHONPATH`` = the repository) with one credential source, a key of
  :data:`SOURCES`. Sources resolved through boto3: ``assume-role-profile``,
  ``web-identity-profile``, ``credential-process-temporary-profile``, ``sso-session-profile``,
  ``sso-legacy-profile``, ``container-full-uri-no-token``, ``container-full-uri-inline-token``;
  through obstore itself: ``imds``,
  ``container-full-uri``.
- :meth:`ExpiringKeys.set_lifetime`: change both numbers for the keys issued from then on.
- :meth:`ExpiringKeys.mark`, :meth:`ExpiringKeys.issued`, :meth:`ExpiringKeys.accepted`,
  :meth:`ExpiringKeys.refusals`: name a phase; keys issued by source, requests forwarded by
  ``service:source``, requests refused (``(mark, verdict, method, url, user agent)``), over the
  marks starting with ``prefix`` (all by default).
- :meth:`ExpiringKeys.fail_refreshes`: the next ``n`` requests for keys (container endpoints,
  ``credential_process`` source, STS, SSO) fail (a 500, or the connection closed unanswered).
- :attr:`ExpiringKeys.stack`: the :class:`~tests.support.cred_servers.CredentialStack` underneath.

Faults: put a ``FaultProxy(moto_endpoint, latency=..., bandwidth=...)`` in front of moto and pass
its endpoint as ``upstream`` (the gate checks signatures against the Host the client signed, so
either order works); the gate is itself a FaultProxy, so ``keys.stack.checker.inject(...)``
scripts faults on it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.cred_harness import AWS_SOURCES, aws_source_environment, register_static_keys
from tests.support.cred_servers import MIN_TTL, CredentialStack, start_credential_stack

__all__ = ["SOURCES", "ExpiringKeys", "start_expiring_keys"]

SOURCES: dict[str, str] = {
    source: AWS_SOURCES[source]
    for source in (
        "assume-role-profile",
        "web-identity-profile",
        "credential-process-temporary-profile",
        "sso-session-profile",
        "sso-legacy-profile",
        "container-full-uri-no-token",
        "container-full-uri-inline-token",
        "imds",
        "container-full-uri",
    )
}
"""The sources :meth:`ExpiringKeys.environment` sets up, each with the name its keys are issued under."""


@dataclass(frozen=True)
class ExpiringKeys:
    """The running stand-ins and gate of :func:`start_expiring_keys`."""

    stack: CredentialStack
    folder: Path

    @property
    def endpoint(self) -> str:
        """The S3 endpoint: ``http://127.0.0.1:<port>``, the gate in front of ``upstream``."""
        return self.stack.checker.endpoint

    def environment(self, source: str) -> dict[str, str]:
        """The whole environment of a process whose only credentials come from ``source``.

        Args:
            source: a key of :data:`SOURCES`.

        Raises:
            ValueError: ``source`` is not one of them.
        """
        if source not in SOURCES:
            raise ValueError(f"unknown credential source {source!r}; use one of {sorted(SOURCES)}")
        return aws_source_environment(source, self.stack, self.folder)

    def set_lifetime(self, lifetime: float, accept_for: float | None) -> None:
        """Advertise ``lifetime`` seconds and accept for ``accept_for`` (None: as advertised), from now on."""
        self.stack.authority.reset(lifetime, accept_for)

    def fail_refreshes(self, n: int, how: str = "500") -> None:
        """Fail the next ``n`` requests for keys: ``how`` = ``"500"`` (an error answer) or ``"close"``."""
        self.stack.authority.fail_next(n, how)

    def mark(self, name: str) -> None:
        """Count what follows under ``name`` (see :meth:`issued`, :meth:`accepted`, :meth:`refusals`)."""
        with self.stack.authority.lock:
            self.stack.authority.mark = name

    def issued(self, prefix: str = "") -> dict[str, int]:
        """Keys handed out, by source, over the marks starting with ``prefix``."""
        return self.stack.authority.counts(prefix)[0]

    def accepted(self, prefix: str = "") -> dict[str, int]:
        """Requests the gate (or STS) accepted, by ``service:source``, over the marks starting with ``prefix``."""
        verdicts = self.stack.authority.counts(prefix)[1]
        return {verdict[3:]: n for verdict, n in verdicts.items() if verdict.startswith("ok:")}

    def refusals(self, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
        """Requests refused (``(mark, verdict, method, url, user agent)``), over the marks starting with ``prefix``."""
        with self.stack.authority.lock:
            return [entry for entry in self.stack.authority.refusals if entry[0].startswith(prefix)]


@contextmanager
def start_expiring_keys(
    upstream: str, folder: Path, *, lifetime: float = MIN_TTL + 1, accept_for: float | None = 3.0
) -> Iterator[ExpiringKeys]:
    """Run the credential stand-ins and the gate in front of ``upstream`` until the block ends.

    Args:
        upstream: the S3 server (moto), or a proxy in front of it.
        folder: a scratch folder for the profiles' homes and a TLS certificate.
        lifetime: the ``Expiration`` each key advertises, seconds after issue.
        accept_for: seconds after issue the gate stops accepting a key (None: as advertised).
    """
    folder.mkdir(parents=True, exist_ok=True)
    with start_credential_stack(upstream, folder) as stack:
        register_static_keys(stack.authority)
        stack.authority.reset(lifetime, accept_for)
        yield ExpiringKeys(stack, folder)
