"""Credential stand-ins on 127.0.0.1, and a signing checker in front of the S3 server.

:class:`CredentialServer` answers as the places AWS hands credentials out from:

- the EC2 instance-metadata service, IMDSv2 only (``PUT /latest/api/token``, then
  ``GET /latest/meta-data/iam/security-credentials/`` and ``.../<role>`` with the session token);
- the ECS/EKS container-credentials endpoint (``GET /container/<kind>/...``, the keys' source is
  ``container-<kind>``; under ``/container/full/`` the ``Authorization`` header must carry the token
  file's text, as EKS Pod Identity checks);
- a ``credential_process`` helper's source (``GET /process/credentials``: the JSON such a
  process prints, ``Version`` 1 with ``Expiration``; the keys' source is ``credential-process``);
- the SSO portal's ``GetRoleCredentials`` (``GET /federation/credentials?role_name=..&account_id=..``
  with the cached SSO access token in ``x-amz-sso_bearer_token``), what boto3 asks for an SSO profile;
- the GCE metadata server's token endpoint (``GET /computeMetadata/v1/instance/service-accounts/
  default/token`` with ``Metadata-Flavor: Google``), for GCS, and what google-auth asks first (``GET /``
  answered with ``Metadata-Flavor: Google``, the account's info at ``.../service-accounts/default/``);
- STS (``POST /sts/``): ``AssumeRoleWithWebIdentity`` with the token file's text, and
  ``AssumeRole`` signed (SigV4) with keys of a registered source profile;
- Google's OAuth token endpoint for an authorized-user (ADC) file (``POST /o/oauth2/token``,
  ``grant_type=refresh_token``), as at ``https://accounts.google.com``;
- Microsoft Entra's token endpoint for a client secret (``POST /<tenant>/oauth2/v2.0/token``) and
  the managed-identity endpoint (``GET /msi/token`` with ``metadata: true`` and, as App Service
  sends it, ``x-identity-header``).

Each answer is a fresh key pair from the shared :class:`Authority`, which remembers every key it
handed out and how long it stays valid. :class:`SigningChecker` sits in front of moto's S3 (moto
checks no signatures) and forwards only requests signed, per SigV4 as botocore's signer computes
it, by a key the authority handed out and still valid; it answers the others as S3 does (400
``ExpiredToken`` for a key past its time, 403 otherwise) and counts them. A key past its time is
counted as ``"late arrival"`` if the request was signed while the key was still accepted (its
process was paused between signing and sending), as ``"expired key"`` if it was signed too late.
:class:`BearerChecker` does the same for bearer tokens in front of fake-gcs-server and Azurite: a
token the authority issued, or a JWT a registered service-account key signed (RS256), as GCS
accepts from a service account (obstore signs its own tokens with the key file's key).

Expiry. A credential advertises ``Expiration = now + lifetime``. Clients refresh a credential when
less than a minimum lifetime is left (obstore: 300 s, its ``TokenCache`` min TTL; botocore: 10-15
minutes), so to test a refresh within seconds the authority can be set to stop accepting a key
``accept_for`` seconds after issuing it, a while after the client should have replaced it:
``lifetime = 300 + 1`` with ``accept_for = 4`` means "refresh after a second, or fail after four".
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import itertools
import json
import secrets
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from tests.support.fault_proxy import FaultProxy

__all__ = [
    "Authority",
    "BearerChecker",
    "CredentialServer",
    "Issued",
    "SigningChecker",
    "start_credential_stack",
    "tls_context",
]

ROLE = "litdata-node-role"
ROLE_ARN = "arn:aws:iam::123456789012:role/litdata-node-role"
ACCOUNT = "123456789012"
SSO_ROLE = "litdata-reader"
OAUTH_CLIENT = ("litdata-client-id", "litdata-client-secret")  # Entra app / Google OAuth client of the tests
REFRESH_TOKEN = "litdata-refresh-token"  # what the authorized-user (ADC) file holds
IDENTITY_HEADER = "litdata-identity-header"  # App Service's secret for its managed-identity endpoint
MIN_TTL = 300.0  # obstore (object_store's TokenCache) refreshes a credential with less left than this


@dataclass
class Issued:
    """A key pair the authority handed out (or registered)."""

    access_key: str
    secret_key: str
    token: str | None
    source: str
    lifetime: float  # advertised, seconds from issue
    accepted_until: float  # time.monotonic() after which the checker refuses it
    services: tuple[str, ...] = ("s3", "sts")  # what the key may sign for

    def document(self) -> dict[str, str]:
        """The JSON the metadata and container endpoints answer."""
        now = dt.datetime.now(dt.timezone.utc)
        return {
            "Code": "Success",
            "Type": "AWS-HMAC",
            "AccessKeyId": self.access_key,
            "SecretAccessKey": self.secret_key,
            "Token": self.token or "",
            "Expiration": (now + dt.timedelta(seconds=self.lifetime)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "RoleArn": ROLE_ARN,
        }


@dataclass
class Authority:
    """Every key handed out, how long each is accepted, and what the checker saw.

    Counts are kept per *mark*: the name of the phase a test driver announced last
    (``GET /mark/<name>`` on the credential server), so one long-running driver process can run
    several phases and each is judged on its own requests.
    """

    lifetime: float = 3600.0
    accept_for: float | None = None  # None: as long as advertised
    mark: str = ""
    issued: dict[str, Issued] = field(default_factory=dict)
    issuances: Counter[tuple[str, str]] = field(default_factory=Counter)  # (mark, source)
    verdicts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (mark, verdict)
    refusals: list[tuple[str, str, str, str, str]] = field(default_factory=list)  # (mark, verdict, method, url, agent)
    jwt_keys: dict[str, tuple[str, Any]] = field(default_factory=dict)  # key id: (client_email, public key)
    failing: int = 0  # requests for keys still to fail (fail_next)
    failing_how: str = "500"
    failed: int = 0  # requests for keys failed so far
    revoked: set[str] = field(default_factory=set)  # keys revoke() took back
    lock: threading.Lock = field(default_factory=threading.Lock)
    _serial: Iterator[int] = field(default_factory=itertools.count)

    def issue(self, source: str) -> Issued:
        with self.lock:
            serial = next(self._serial)
            accept = self.lifetime if self.accept_for is None else self.accept_for
            issued = Issued(
                access_key=f"ASIA{serial:016d}",
                secret_key=secrets.token_hex(20),
                token=secrets.token_urlsafe(24),
                source=source,
                lifetime=self.lifetime,
                accepted_until=time.monotonic() + accept,
            )
            self.issued[issued.access_key] = issued
            self.issuances[self.mark, source] += 1
            return issued

    def fail_next(self, n: int, how: str = "500") -> None:
        """Fail the next ``n`` requests for AWS keys (container, ``credential_process``, SSO, STS).

        ``how``: ``"500"`` answers 500 (a source that is down), ``"close"`` closes the connection
        without an answer (one that crashed mid-request).
        """
        if how not in ("500", "close"):
            raise ValueError(f"how must be '500' or 'close', got {how!r}")
        with self.lock:
            self.failing, self.failing_how = n, how

    def take_failure(self) -> str | None:
        """How to fail this request for keys, or None to answer it."""
        with self.lock:
            if self.failing <= 0:
                return None
            self.failing -= 1
            self.failed += 1
            return self.failing_how

    def revoke(self) -> int:
        """Revoke every temporary key handed out so far (refused from now on: 403 ``InvalidAccessKeyId``); how many."""
        with self.lock:
            revoked = [key for key, issued in self.issued.items() if issued.source != "static"]
            for key in revoked:
                del self.issued[key]
            self.revoked.update(revoked)
            return len(revoked)

    def register_static(self, access_key: str, secret_key: str, services: tuple[str, ...] = ("s3", "sts")) -> None:
        """Accept a never-expiring key pair (a profile's static keys) for ``services``."""
        with self.lock:
            self.issued[access_key] = Issued(
                access_key, secret_key, None, "static", float("inf"), float("inf"), services
            )

    def verify(self, method: str, url: str, headers: Mapping[str, str], service: str, body: bytes = b"") -> str:
        """``"ok"`` or why the request is refused (``"unsigned"``, ``"unknown key"``, ...).

        S3 requests carry their payload's hash in ``x-amz-content-sha256``; for STS, ``body`` is hashed.
        """
        verdict, source = _verify(self, method, url, headers, service, body)
        with self.lock:
            self.verdicts[self.mark, verdict if verdict != "ok" else f"ok:{service}:{source}"] += 1
            if verdict != "ok":
                agent = headers.get("user-agent", headers.get("User-Agent", ""))
                self.refusals.append((self.mark, verdict, method, url, agent))
        return verdict

    def verify_bearer(self, headers: Mapping[str, str], service: str) -> str:
        """``"ok"`` if the request carries ``Authorization: Bearer <a valid token>``.

        A valid token is one issued and still accepted, or a service account's self-signed JWT.
        """
        auth = headers.get("authorization", headers.get("Authorization", ""))
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
        with self.lock:
            found = next((i for i in self.issued.values() if token == i.token), None) if token else None
            if token is None:
                verdict, source = "unsigned", ""
            elif found is not None:
                alive = time.monotonic() <= found.accepted_until
                verdict, source = ("ok" if alive else "expired token"), found.source
            else:
                verdict, source = _verify_jwt(token, self.jwt_keys), "service-account"
            self.verdicts[self.mark, verdict if verdict != "ok" else f"ok:{service}:{source}"] += 1
            if verdict != "ok":
                self.refusals.append((self.mark, verdict, "", "", ""))
        return verdict

    def counts(self, prefix: str) -> tuple[dict[str, int], dict[str, int]]:
        """Issuances by source and checker verdicts, over the marks starting with ``prefix``.

        An accepted request's verdict is ``ok:<service>:<source of its key>``.
        """
        with self.lock:
            issued: Counter[str] = Counter()
            verdicts: Counter[str] = Counter()
            for (mark, source), n in self.issuances.items():
                if mark.startswith(prefix) and n:
                    issued[source] += n
            for (mark, verdict), n in self.verdicts.items():
                if mark.startswith(prefix):
                    verdicts[verdict] += n
            return dict(issued), dict(verdicts)

    def reset(self, lifetime: float = 3600.0, accept_for: float | None = None) -> None:
        """Set how long the credentials issued from now on live, and are accepted."""
        with self.lock:
            self.lifetime, self.accept_for = lifetime, accept_for


def _unbase64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _verify_jwt(token: str, keys: Mapping[str, tuple[str, Any]]) -> str:
    """``"ok"`` if ``token`` is a self-signed JWT (RS256) of a registered key, for GCS, unexpired."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    parts = token.split(".")
    if len(parts) != 3:
        return "unknown token"
    try:
        header, claims = json.loads(_unbase64(parts[0])), json.loads(_unbase64(parts[1]))
    except ValueError:
        return "unknown token"
    if header.get("alg") != "RS256" or header.get("kid") not in keys:
        return "unknown signing key"
    email, public_key = keys[header["kid"]]
    try:
        public_key.verify(_unbase64(parts[2]), f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return "bad signature"
    if claims.get("iss") != email or "https://www.googleapis.com/auth/cloud-platform" not in claims.get("scope", ""):
        return "wrong issuer or scope"
    if not claims.get("iat", 0) - 60 <= time.time() < claims.get("exp", 0):
        return "expired token"
    return "ok"


def _expired_verdict(amz_date: str, refused_from: float) -> str:
    """``"late arrival"`` if the request was signed before its key was refused (wall clock), else ``"expired key"``.

    A late arrival was signed in time and reached the bucket after its key's end: a process paused
    between signing and sending. ``X-Amz-Date`` has whole seconds, so a request signed within the
    second of the refusal counts as an expired key.
    """
    try:
        signed = dt.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError:
        return "expired key"
    return "late arrival" if signed + 1 <= refused_from else "expired key"


def _verify(
    authority: Authority, method: str, url: str, headers: Mapping[str, str], service: str, body: bytes
) -> tuple[str, str | None]:
    from botocore.auth import S3SigV4Auth, SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    lower = {k.lower(): v for k, v in headers.items()}
    auth = lower.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "unsigned", None
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 ") :].split(","))
    access_key, date, region, scope_service, _ = fields["Credential"].split("/")
    with authority.lock:
        issued = authority.issued.get(access_key)
    if issued is None:
        with authority.lock:
            return ("revoked key" if access_key in authority.revoked else "unknown key"), None
    late = time.monotonic() - issued.accepted_until
    if late > 0:
        return _expired_verdict(lower.get("x-amz-date", ""), time.time() - late), None
    if scope_service != service or service not in issued.services:
        return "wrong service", None
    if (issued.token or "") != lower.get("x-amz-security-token", ""):
        return "wrong session token", None
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(method=method, url=url, headers={name: lower.get(name, "") for name in signed}, data=body)
    request.context["timestamp"] = lower.get("x-amz-date", "")
    if not request.context["timestamp"].startswith(date):
        return "wrong date", None
    signer_class = S3SigV4Auth if service == "s3" else SigV4Auth
    signer = signer_class(Credentials(issued.access_key, issued.secret_key, issued.token), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not secrets.compare_digest(str(expected), fields["Signature"]):
        return "bad signature", None
    return "ok", issued.source


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def stand_in(self) -> _Server:
        return cast(_Server, self.server)

    def log_message(self, format: str, *args: object) -> None:
        return

    def _answer(self, status: int, body: str | bytes, kind: str = "text/plain") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def do_PUT(self) -> None:
        self._read_body()
        if self.path == "/latest/api/token" and self.headers.get("x-aws-ec2-metadata-token-ttl-seconds"):
            token = secrets.token_urlsafe(16)
            with self.stand_in.authority.lock:
                self.stand_in.imds_tokens.add(token)
            self._answer(200, token)
        else:
            self._answer(400, "bad token request")

    def _failed(self) -> bool:
        """Whether this request for keys is one :meth:`Authority.fail_next` scripted to fail (and was failed)."""
        how = self.stand_in.authority.take_failure()
        if how == "500":
            self._answer(500, "the credential source is down (scripted)")
        elif how == "close":
            self.close_connection = True  # no answer at all: the client sees the connection closed
        return how is not None

    def do_GET(self) -> None:
        server = self.stand_in
        path = urlsplit(self.path).path
        if path.startswith(("/container/", "/federation/", "/process/")) and self._failed():
            return
        if path.startswith("/mark/"):
            with server.authority.lock:
                server.authority.mark = path[len("/mark/") :]
            self._answer(200, "ok")
        elif path.startswith("/latest/meta-data/iam/security-credentials/"):
            if self.headers.get("x-aws-ec2-metadata-token") not in server.imds_tokens:
                self._answer(401, "IMDSv2 session token missing or unknown")  # no IMDSv1 here
            elif path.endswith("/security-credentials/"):
                self._answer(200, ROLE)
            elif path.endswith("/" + ROLE):
                self._answer(200, json.dumps(server.authority.issue("imds").document()), "application/json")
            else:
                self._answer(404, "no such role")
        elif path == "/":  # google-auth's check for a GCE machine (GCE_METADATA_IP) looks for this header
            self.send_response(200)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/computeMetadata/v1/instance/service-accounts/default/":  # google-auth asks before a token
            info = {"email": "loader@litdata-test.iam.gserviceaccount.com", "scopes": [], "aliases": ["default"]}
            self._answer(200, json.dumps(info), "application/json")
        elif path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("metadata-flavor") != "Google":
                self._answer(403, "Metadata-Flavor: Google missing")
                return
            issued = server.authority.issue("gce")
            answer = {"access_token": issued.token, "expires_in": int(issued.lifetime), "token_type": "Bearer"}
            self._answer(200, json.dumps(answer), "application/json")
        elif path.startswith("/container/"):
            if path.startswith("/container/full/") and self.headers.get("authorization") != server.container_token:
                self._answer(403, "the Authorization header is not the container token")
                return
            source = "container-" + path.split("/")[2]
            self._answer(200, json.dumps(server.authority.issue(source).document()), "application/json")
        elif path == "/federation/credentials":
            self._sso_role_credentials()
        elif path == "/process/credentials":
            document = server.authority.issue("credential-process").document()
            answer = {
                "Version": 1,
                "AccessKeyId": document["AccessKeyId"],
                "SecretAccessKey": document["SecretAccessKey"],
                "SessionToken": document["Token"],
                "Expiration": document["Expiration"],
            }
            self._answer(200, json.dumps(answer), "application/json")
        elif path == "/msi/token":
            if self.headers.get("metadata") != "true" or self.headers.get("x-identity-header") != IDENTITY_HEADER:
                self._answer(400, json.dumps({"error": "invalid_request"}), "application/json")
                return
            issued = server.authority.issue("azure-msi")
            answer = {"access_token": issued.token, "expires_on": str(int(time.time() + issued.lifetime))}
            self._answer(200, json.dumps(answer), "application/json")
        else:
            self._answer(404, "not here")

    def _sso_role_credentials(self) -> None:
        query = dict(parse_qsl(urlsplit(self.path).query))
        if self.headers.get("x-amz-sso_bearer_token") != self.stand_in.sso_token:
            self._answer(401, json.dumps({"message": "Session token not found or invalid"}), "application/json")
        elif (query.get("role_name"), query.get("account_id")) != (SSO_ROLE, ACCOUNT):
            self._answer(403, json.dumps({"message": "No access"}), "application/json")
        else:
            issued = self.stand_in.authority.issue("sso")
            expires_ms = int((time.time() + issued.lifetime) * 1000)
            keys = {"accessKeyId": issued.access_key, "secretAccessKey": issued.secret_key}
            answer = {"roleCredentials": {**keys, "sessionToken": issued.token, "expiration": expires_ms}}
            self._answer(200, json.dumps(answer), "application/json")

    def _oauth_token(self, form: Mapping[str, str]) -> None:
        """Entra's client-credentials grant, or Google's refresh-token grant (authorized user)."""
        client = (form.get("client_id"), form.get("client_secret"))
        if self.path.endswith("/oauth2/v2.0/token"):
            known = form.get("grant_type") == "client_credentials" and client == OAUTH_CLIENT
            source = "azure-client-secret"
        else:
            refresh = (form.get("grant_type"), form.get("refresh_token"))
            known = client == OAUTH_CLIENT and refresh == ("refresh_token", REFRESH_TOKEN)
            source = "gcs-user"
        if not known:
            self._answer(401, json.dumps({"error": "invalid_client"}), "application/json")
            return
        issued = self.stand_in.authority.issue(source)
        answer = {"access_token": issued.token, "expires_in": int(issued.lifetime), "token_type": "Bearer"}
        self._answer(200, json.dumps(answer), "application/json")

    def do_POST(self) -> None:
        server = self.stand_in
        body = self._read_body()
        params = dict(parse_qsl(urlsplit(self.path).query))
        params.update(parse_qsl(body.decode()))
        action = params.get("Action")
        if self.path.endswith(("/oauth2/v2.0/token", "/o/oauth2/token")):
            self._oauth_token(params)
            return
        if action in ("AssumeRole", "AssumeRoleWithWebIdentity") and self._failed():
            return
        if action == "AssumeRoleWithWebIdentity":
            if params.get("WebIdentityToken") != server.web_identity_token:
                self._answer(400, _sts_error("InvalidIdentityToken", "the web identity token is not the one issued"))
                return
            issued = server.authority.issue("web-identity")
        elif action == "AssumeRole":
            url = f"http://{self.headers.get('host')}{self.path}"
            verdict = server.authority.verify("POST", url, dict(self.headers.items()), "sts", body)
            if verdict != "ok":
                self._answer(403, _sts_error("AccessDenied", verdict))
                return
            issued = server.authority.issue("assume-role")
        else:
            self._answer(400, _sts_error("InvalidAction", f"not served here: {action}"))
            return
        self._answer(200, _sts_answer(action, issued), "text/xml")


def _sts_error(code: str, message: str) -> str:
    error = f"<Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
    return f"<ErrorResponse>{error}</ErrorResponse>"


def _sts_answer(action: str, issued: Issued) -> str:
    document = issued.document()
    return (
        f'<{action}Response xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><{action}Result><Credentials>'
        f"<AccessKeyId>{issued.access_key}</AccessKeyId><SecretAccessKey>{issued.secret_key}</SecretAccessKey>"
        f"<SessionToken>{issued.token}</SessionToken><Expiration>{document['Expiration']}</Expiration>"
        f"</Credentials><AssumedRoleUser><Arn>{ROLE_ARN}/litdata</Arn><AssumedRoleId>AROA:litdata</AssumedRoleId>"
        f"</AssumedRoleUser></{action}Result><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, authority: Authority, tls: ssl.SSLContext | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.authority = authority
        self.imds_tokens: set[str] = set()
        self.container_token = "container-" + secrets.token_hex(8)
        self.web_identity_token = "jwt-" + secrets.token_hex(16)
        self.sso_token = "sso-" + secrets.token_hex(16)


class CredentialServer:
    """IMDSv2, container credentials and STS on one loopback port (a context manager).

    Args:
        authority: issues the keys.
        tls: serve HTTPS with this context (obstore talks to STS over HTTPS only).
    """

    def __init__(self, authority: Authority, tls: ssl.SSLContext | None = None) -> None:
        self._server = _Server(authority, tls)
        self._scheme = "https" if tls else "http"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def endpoint(self) -> str:
        """``http(s)://127.0.0.1:<port>``: the metadata endpoint; STS is at ``/sts/``."""
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def container_token(self) -> str:
        """What the full-URI container endpoint wants in ``Authorization``."""
        return self._server.container_token

    @property
    def web_identity_token(self) -> str:
        """What the web-identity token file must hold."""
        return self._server.web_identity_token

    @property
    def sso_token(self) -> str:
        """The SSO access token the portal accepts (what ``aws sso login`` would have cached)."""
        return self._server.sso_token

    def __enter__(self) -> CredentialServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


# How S3 answers each verdict (None: forward it); an expired session token is a 400, not a 403.
_REFUSALS: dict[str, str | None] = {
    "ok": None,
    "expired key": "400:ExpiredToken",
    "late arrival": "400:ExpiredToken",
    "unknown key": "403:InvalidAccessKeyId",
    "revoked key": "403:InvalidAccessKeyId",
    "bad signature": "403:SignatureDoesNotMatch",
}


class SigningChecker(FaultProxy):
    """A proxy in front of the S3 server that forwards only requests signed by a valid issued key.

    Args:
        upstream: the S3 server.
        authority: whose keys are accepted.
        tls: serve HTTPS with this context (a bucket behind a private CA).
    """

    def __init__(self, upstream: str, authority: Authority, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(upstream)
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._scheme = "https" if tls else "http"

        def gate(method: str, path: str, headers: Mapping[str, str]) -> str | None:
            url = f"http://{headers.get('host') or headers.get('Host')}{path}"
            return _REFUSALS.get(authority.verify(method, url, headers, "s3"), "403:AccessDenied")

        self.set_gate(gate)

    @property
    def endpoint(self) -> str:
        """The S3 endpoint: ``http(s)://127.0.0.1:<port>``."""
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"


def _certificate(subject: str, key: Any, issuer: tuple[str, Any] | None) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    issuer_name, issuer_key = issuer or (subject, key)
    now = dt.datetime.now(dt.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        # accounts.google.com: the fixed token URL of an authorized-user file, reached in a namespace
        names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("accounts.google.com")]
        san = x509.SubjectAlternativeName(names)
        builder = builder.add_extension(san, critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def tls_context(folder: Path) -> tuple[ssl.SSLContext, Path]:
    """A TLS context for 127.0.0.1 (a certificate from a fresh test CA), and the CA's PEM file to trust."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("litdata test CA", ca_key, None)
    leaf = _certificate("127.0.0.1", key, ("litdata test CA", ca_key))
    ca_file, cert_file, key_file = folder / "test-ca.pem", folder / "sts-cert.pem", folder / "sts-key.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context, ca_file


class BearerChecker(FaultProxy):
    """A proxy in front of an emulator that forwards only requests with a valid bearer token.

    Args:
        upstream: the emulator.
        authority: whose tokens are accepted.
        service: the name verdicts are counted under (``ok:<service>:<source>``).
        drop_authorization: forward without the ``Authorization`` header (Azurite refuses a bearer
            token over HTTP; behind this proxy it serves a public container).
    """

    def __init__(self, upstream: str, authority: Authority, service: str, drop_authorization: bool = False) -> None:
        super().__init__(upstream)
        self.set_gate(
            lambda method, path, headers: None if authority.verify_bearer(headers, service) == "ok" else "401",
            rewrite_host=True,
            drop_authorization=drop_authorization,
        )


@dataclass(frozen=True)
class CredentialStack:
    """The stand-ins and the checker of one test session.

    Attributes:
        authority: the keys handed out, and the checker's verdicts.
        credentials: IMDS, container credentials and STS over HTTP.
        tls_credentials: the same over HTTPS (for obstore's web identity, which insists on HTTPS).
        ca_file: the PEM certificate ``tls_credentials`` presents, to trust (``SSL_CERT_FILE``).
        checker: the signing checker in front of the S3 server; its ``endpoint`` is the S3 endpoint.
        tls_checker: the same over HTTPS, with a certificate from the CA in ``ca_file``.
    """

    authority: Authority
    credentials: CredentialServer
    tls_credentials: CredentialServer
    ca_file: Path
    checker: SigningChecker
    tls_checker: SigningChecker


@contextmanager
def start_credential_stack(s3_endpoint: str, folder: Path) -> Iterator[CredentialStack]:
    """Run the credential stand-ins and a signing checker in front of ``s3_endpoint``.

    Args:
        s3_endpoint: the S3 server (moto).
        folder: where the TLS certificate is written.
    """
    authority = Authority()
    tls, ca_file = tls_context(folder)
    checker, tls_checker = SigningChecker(s3_endpoint, authority), SigningChecker(s3_endpoint, authority, tls)
    with CredentialServer(authority) as credentials, CredentialServer(authority, tls) as tls_credentials:
        tls_credentials._server.web_identity_token = credentials.web_identity_token
        with checker, tls_checker:
            yield CredentialStack(authority, credentials, tls_credentials, ca_file, checker, tls_checker)
