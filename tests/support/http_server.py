"""A read-only file server on 127.0.0.1 that answers as a plain web server does: GET and HEAD of the
files under a folder, single byte ranges, ETag and Last-Modified (no listing).

For the HTTP backend's conformance run (``tests/test_storage_http.py``) and the docs' blocks that read
``https://...`` URLs (``tests/test_docs_code_blocks.py``).
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit

__all__ = ["serve_folder"]

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class FileServer(ThreadingHTTPServer):
    daemon_threads = True
    root: Path


class RangeFiles(BaseHTTPRequestHandler):
    """GET/HEAD of files under the server's root, with single byte ranges, ETag and Last-Modified."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def _serve(self, body: bool) -> None:
        root = cast(FileServer, self.server).root
        path = root / unquote(urlsplit(self.path).path).lstrip("/")
        if not path.is_file() or root not in path.resolve().parents:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = path.read_bytes()
        status, start, end = 200, 0, len(data)
        match = _RANGE.match(self.headers.get("Range", ""))
        if match:
            start = int(match.group(1))
            end = min(int(match.group(2)) + 1 if match.group(2) else len(data), len(data))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{hashlib.md5(data).hexdigest()}"')
        self.send_header("Last-Modified", email.utils.formatdate(path.stat().st_mtime, usegmt=True))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if body:
            self.wfile.write(data[start:end])

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)


@contextlib.contextmanager
def serve_folder(root: Path) -> Iterator[str]:
    """Serve the files under ``root`` until the block ends; yields the server's ``http://127.0.0.1:<port>`` URL."""
    server = FileServer(("127.0.0.1", 0), RangeFiles)
    server.root = root.resolve()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
