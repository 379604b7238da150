"""An S3-compatible server for the cloud tests: ``moto_server`` (from ``moto[server]``) on 127.0.0.1.

The server runs as a child process on a free port, is waited for until it answers, and is killed
at teardown. obstore cannot create buckets, so :meth:`S3Server.create_bucket` uses boto3. Other
emulators (Azure, GCS, the Hugging Face Hub) live in ``tests/support/servers_extra.py``; each server has
its own ``start_*`` context manager and session fixture, so a test needs only what it uses.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["S3Server", "free_port", "s3_bucket", "s3_server", "start_moto"]

STARTUP_TIMEOUT = 120.0  # a loaded 2-core CI machine can take long to start a server
_buckets = itertools.count()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class S3Server:
    """A running S3-compatible server.

    Attributes:
        endpoint: ``http://127.0.0.1:<port>``.
        access_key: the access key id the tests use (moto accepts any).
        secret_key: the secret key the tests use.
        region: the region buckets are created in.
    """

    endpoint: str
    access_key: str = "litdata-test-key"
    secret_key: str = "litdata-test-secret-value"
    region: str = "us-east-1"

    def client(self) -> Any:
        """A boto3 S3 client for this server (to create buckets and seed objects)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name by default) and return its name."""
        name = name or f"bucket{os.getpid()}x{next(_buckets)}"
        self.client().create_bucket(Bucket=name)
        return name

    def storage_options(self, endpoint: str | None = None) -> dict[str, str]:
        """boto3-style ``storage_options`` for this server (or for a proxy at ``endpoint``)."""
        return {
            "endpoint_url": endpoint or self.endpoint,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "region_name": self.region,
        }


def _moto_binary() -> str:
    local = Path(sys.executable).with_name("moto_server")
    found = str(local) if local.exists() else shutil.which("moto_server")
    if not found:
        raise RuntimeError('moto_server is not installed: uv add --dev "moto[server]" (or: uv sync)')
    return found


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def start_moto() -> Iterator[S3Server]:
    """Run ``moto_server`` on a free port until the block ends."""
    binary = _moto_binary()
    with tempfile.TemporaryDirectory(prefix="moto-log-") as tmp:
        log = Path(tmp) / "moto.log"
        for attempt in range(3):
            port = free_port()
            with log.open("wb") as sink:
                proc = subprocess.Popen(
                    [binary, "-H", "127.0.0.1", "-p", str(port)],
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while proc.poll() is None and time.monotonic() < deadline:
                if _answers(f"http://127.0.0.1:{port}/moto-api/"):
                    break
                time.sleep(0.05)
            else:
                _stop(proc)
                output = log.read_text(errors="replace")[-3000:]
                if attempt < 2 and "address already in use" in output.lower():
                    continue  # another process took the port between our probe and moto's bind
                raise RuntimeError(f"moto_server did not start on port {port}:\n{output}")
            try:
                yield S3Server(endpoint=f"http://127.0.0.1:{port}")
            finally:
                _stop(proc)
            return


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A moto S3 server shared by the whole test session."""
    with start_moto() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A fresh, empty bucket on the session's S3 server."""
    return s3_server.create_bucket()
