"""The conformance suite (read-only part) on plain HTTP: a small Range-aware file server on 127.0.0.1."""

from __future__ import annotations

import email.utils
import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit

import pytest

from litdata_io import Storage, StorageError, get_storage
from litdata_io.testing import StorageConformance, StorageFactory

pytestmark = pytest.mark.cloud
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _FileServer(ThreadingHTTPServer):
    daemon_threads = True
    root: Path


class _Files(BaseHTTPRequestHandler):
    """GET/HEAD of files under the server's root, with single byte ranges, ETag and Last-Modified."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def _serve(self, body: bool) -> None:
        root = cast(_FileServer, self.server).root
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


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    server = _FileServer(("127.0.0.1", 0), _Files)
    server.root = (tmp_path / "www").resolve()
    server.root.mkdir()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/data", server.root / "data"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class TestHTTPStorage(StorageConformance):
    writable = False

    @pytest.fixture
    def storage_factory(self, http_root: tuple[str, Path]) -> StorageFactory:
        def make(**options: object) -> Storage:
            return get_storage(http_root[0], storage_options=options)

        return make

    @pytest.fixture
    def seed(self, http_root: tuple[str, Path]) -> Callable[[str, bytes], None]:
        def write(key: str, data: bytes) -> None:
            path = http_root[1] / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        return write

    def test_list_prefix_and_recursion(self, storage: Storage, seed: Callable[[str, bytes], None]) -> None:
        with pytest.raises(StorageError):  # a plain web server has no listing API
            storage.list()

    def test_list_pages_give_the_listing_in_key_order(
        self, storage: Storage, seed: Callable[[str, bytes], None]
    ) -> None:
        with pytest.raises(StorageError):  # nor in pages
            next(iter(storage.list_pages(page_size=2)))
