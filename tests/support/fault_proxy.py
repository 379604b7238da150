"""A loopback HTTP proxy that forwards to an upstream server and injects faults on cue.

Clients talk to the proxy as if it were the S3 endpoint (``endpoint_url=proxy.endpoint``). Faults
are scripted with :meth:`FaultProxy.inject`; each matching request consumes one occurrence, in
the order the faults were added. Every request is logged as ``(method, path, action)``.

Actions:
    ``"503"``, ``"500"``, ``"429"``, ``"403"``, ...: answer that status with an S3-style XML error
        (``SlowDown`` for 503/429, ``AccessDenied`` for 403) without asking upstream;
        ``"400:ExpiredToken"``: that status with that error code.
    ``"reset"``: close the connection with a TCP RST before answering.
    ``"reset_body"``: forward, send the headers and half the body, then RST.
    ``"cut_body"``: forward half the body as if it were whole (its ``Content-Length`` says half,
        as a middlebox whose upstream connection dropped sends what it got), then close cleanly:
        the client sees a complete answer that is too short, not a reset.
    ``"stall"``: wait ``stall`` seconds without answering, then drop the connection.
    ``"delay"``: hold the request ``stall`` seconds, then forward it (a request that reaches the
        server late, as one sent by a process paused after it signed it).

A cloud bucket's shape: ``FaultProxy(upstream, latency=0.03, bandwidth=50e6)`` holds every
forwarded answer's first byte back ``latency`` seconds and paces each connection's bodies to
``bandwidth`` bytes/s (one handler thread per connection, so the limit is per connection).
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit

__all__ = ["Fault", "FaultProxy", "Gate"]

Gate = Callable[[str, str, Mapping[str, str]], "str | None"]
"""Decides each request before it is forwarded: an error to answer instead (an action such as
``"403"`` or ``"400:ExpiredToken"``), or None to let it pass."""

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
_PACE_BYTES = 64 << 10  # a paced body goes out in pieces this big
_CODES = {403: "AccessDenied", 429: "SlowDown", 500: "InternalError", 503: "SlowDown"}


@dataclass
class Fault:
    """A scripted fault: ``action`` for ``times`` requests matching ``method``/``path_contains``,
    after letting the first ``skip`` matching requests through."""

    action: str
    method: str | None = None
    path_contains: str | None = None
    times: int = 1
    stall: float = 0.0
    skip: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (
            self.times > 0
            and (self.method is None or self.method == method)
            and (self.path_contains is None or self.path_contains in path)
        )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def proxy(self) -> _Server:
        return cast(_Server, self.server)

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: the proxy keeps its own log

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _reset(self) -> None:
        # SO_LINGER with a zero timeout turns close() into a TCP RST: the client sees a reset.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _error(self, action: str) -> None:
        status_text, _, code = action.partition(":")
        status = int(status_text)
        code = code or _CODES.get(status, "InternalError")
        body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>injected</Message></Error>"
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(self.proxy.upstream_host, self.proxy.upstream_port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            if self.proxy.rewrite_host:  # servers that read the bucket from the Host header (fake-gcs-server)
                headers = {k: v for k, v in headers.items() if k.lower() != "host"}
                headers["Host"] = f"{self.proxy.upstream_host}:{self.proxy.upstream_port}"
            if self.proxy.drop_authorization:
                headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            upstream.close()

    def _handle(self) -> None:
        body = self._body()
        gate = self.proxy.gate
        if gate is not None and (refusal := gate(self.command, self.path, dict(self.headers.items()))):
            self.proxy.record(self.command, self.path, refusal)
            self._error(refusal)
            return
        fault = self.proxy.take(self.command, self.path)
        action = fault.action if fault else "pass"
        self.proxy.record(self.command, self.path, action)
        if fault is None:
            self._relay(*self._forward(body))
        elif action == "delay":
            self.proxy.stopping.wait(fault.stall)
            self._relay(*self._forward(body))
        elif action[:3].isdigit():
            self._error(action)
        elif action == "reset":
            self._reset()
        elif action == "stall":
            self.proxy.stopping.wait(fault.stall)
            self._reset()
        elif action in ("reset_body", "cut_body"):
            self._relay(*self._forward(body), cut=action)
        else:  # pragma: no cover - a typo in a test's script
            raise ValueError(f"unknown fault action {action!r}")

    def _relay(self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes, cut: str = "") -> None:
        if self.proxy.latency:
            self.proxy.stopping.wait(self.proxy.latency)
        self.send_response(status, reason)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        length = dict((k.lower(), v) for k, v in headers).get("content-length", "0")
        if cut == "cut_body":
            data = data[: len(data) // 2]
        self.send_header("Content-Length", length if self.command == "HEAD" else str(len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if cut == "cut_body":
            self.wfile.write(data)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if cut:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self._reset()
            return
        self._paced_write(data)
        with self.proxy.lock:
            self.proxy.sent_bytes += len(data)

    def _paced_write(self, data: bytes) -> None:
        """Write ``data``, no faster than the proxy's ``bandwidth`` bytes/s on this connection."""
        rate = self.proxy.bandwidth
        if not rate:
            self.wfile.write(data)
            return
        started = time.monotonic()
        view = memoryview(data)
        for start in range(0, len(data), _PACE_BYTES):
            self.wfile.write(view[start : start + _PACE_BYTES])
            ahead = (start + _PACE_BYTES) / rate - (time.monotonic() - started)
            if ahead > 0:
                self.proxy.stopping.wait(ahead)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, upstream: str, latency: float, bandwidth: float | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.latency = latency
        self.bandwidth = bandwidth
        self.sent_bytes = 0
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.faults: list[Fault] = []
        self.gate: Gate | None = None
        self.rewrite_host = False
        self.drop_authorization = False
        self.log: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def take(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    if fault.skip > 0:
                        fault.skip -= 1
                        return None
                    fault.times -= 1
                    return fault
        return None

    def record(self, method: str, path: str, action: str) -> None:
        with self.lock:
            self.log.append((method, path, action))


class FaultProxy:
    """A fault-injecting proxy on 127.0.0.1 in front of ``upstream`` (use as a context manager).

    Args:
        upstream: the real server, e.g. ``http://127.0.0.1:5000``.
        latency: seconds every forwarded answer's first byte is held back.
        bandwidth: bytes/s each connection's answer bodies are paced to (None: as fast as possible).
    """

    def __init__(self, upstream: str, *, latency: float = 0.0, bandwidth: float | None = None) -> None:
        self._server = _Server(upstream, latency, bandwidth)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fault-proxy", daemon=True
        )

    @property
    def endpoint(self) -> str:
        """The proxy's URL, to use as the S3 endpoint."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(
        self,
        action: str,
        *,
        method: str | None = None,
        path_contains: str | None = None,
        times: int = 1,
        stall: float = 0.0,
        skip: int = 0,
    ) -> None:
        """Script ``action`` for ``times`` matching requests after ``skip`` (see the module docstring)."""
        with self._server.lock:
            self._server.faults.append(Fault(action, method, path_contains, times, stall, skip))

    def set_gate(self, gate: Gate | None, rewrite_host: bool = False, drop_authorization: bool = False) -> None:
        """Refuse requests ``gate(method, path, headers)`` answers a status for (logged as that status).

        Args:
            gate: the check, or None to forward everything.
            rewrite_host: send the upstream's address as ``Host`` (the client's names the proxy).
            drop_authorization: forward without the ``Authorization`` header (the gate checked it).
        """
        with self._server.lock:
            self._server.gate = gate
            self._server.rewrite_host = rewrite_host
            self._server.drop_authorization = drop_authorization

    def requests(self, method: str | None = None, path_contains: str | None = None) -> list[tuple[str, str, str]]:
        """The logged ``(method, path, action)`` of the requests seen so far, optionally filtered."""
        with self._server.lock:
            return [
                entry
                for entry in self._server.log
                if (method is None or entry[0] == method) and (path_contains is None or path_contains in entry[1])
            ]

    @property
    def sent_bytes(self) -> int:
        """The body bytes of forwarded answers sent to clients since the last :meth:`clear`."""
        with self._server.lock:
            return self._server.sent_bytes

    def clear(self) -> None:
        """Forget the script, the log and the byte count."""
        with self._server.lock:
            self._server.faults.clear()
            self._server.log.clear()
            self._server.sent_bytes = 0

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
