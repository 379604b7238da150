"""A tiny stand-in for the Hugging Face Hub: the read-only endpoints ``HfFileSystem`` uses.

Repositories are plain folders under a root: ``<root>/datasets/<org>/<name>/...`` for dataset
repos, ``<root>/models/<org>/<name>/...`` for model repos (and ``spaces``). Every repository has
one revision, ``main``, whose commit id is :data:`COMMIT`; files are read from disk on every
request, so a test may add files while the server runs (fsspec caches listings: open a fresh
filesystem or call ``invalidate_cache`` to see them).

Endpoints (all GET unless noted), ``{kind}`` being ``datasets``/``models``/``spaces``:

- ``/api/{kind}/{org}/{name}`` and ``/api/{kind}/{org}/{name}/revision/{rev}``: repo info.
- ``/api/{kind}/{org}/{name}/tree/{rev}[/{path}]?recursive=&expand=``: a folder listing.
- POST ``/api/{kind}/{org}/{name}/paths-info/{rev}`` (form ``paths=...&expand=...``): path infos.
- GET/HEAD ``/[{kind}/]{org}/{name}/resolve/{rev}/{path}``: the file, ``Range: bytes=a-b`` aware,
  with the headers the client reads (``X-Repo-Commit``, ``ETag``, ``Content-Length``).

Run as a script (``python hf_hub_server.py --root DIR [--port N]``) it prints
``listening on http://127.0.0.1:<port>`` once it accepts connections, then serves until killed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["COMMIT", "HfHubServer", "main"]

#: The commit id of every repository's single revision.
COMMIT = hashlib.sha1(b"litdata test hub").hexdigest()
REVISIONS = {"main", COMMIT}
KINDS = ("datasets", "models", "spaces")
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_DATE = "2024-01-01T00:00:00.000Z"


def _git_oid(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).hexdigest()


class _HubError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real Hub; every response sets Content-Length
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def hub(self) -> _Server:
        assert isinstance(self.server, _Server)
        return self.server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded in ``server.log`` instead of printed

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_POST(self) -> None:
        self._dispatch(head=False)

    def _dispatch(self, head: bool) -> None:
        self.hub.log.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            self._route(urlsplit(self.path), body, head)
        except _HubError as err:
            payload = json.dumps({"error": err.message}).encode()
            self._send(err.status, payload, {"Content-Type": "application/json", "X-Error-Code": err.code}, head)

    def _send(self, status: int, payload: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not head:
            self.wfile.write(payload)

    def _json(self, obj: Any, head: bool = False, headers: dict[str, str] | None = None) -> None:
        self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})}, head)

    # -- routing --------------------------------------------------------------------------------
    def _route(self, url: Any, body: bytes, head: bool) -> None:
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        query = parse_qs(url.query)
        if parts[:1] == ["api"] and len(parts) >= 4 and parts[1] in KINDS:
            kind, repo = parts[1], self._repo(parts[1], parts[2], parts[3])
            rest = parts[4:]
            if not rest:
                return self._repo_info(kind, repo, head)
            if rest[0] == "revision" and len(rest) >= 2:
                self._revision("/".join(rest[1:]))
                return self._repo_info(kind, repo, head)
            if rest[0] == "tree" and len(rest) >= 2:
                self._revision(rest[1])
                return self._tree(repo, "/".join(rest[2:]), query, head)
            if rest[0] == "paths-info" and len(rest) >= 2 and self.command == "POST":
                self._revision(rest[1])
                form = parse_qs(body.decode(), keep_blank_values=True)
                return self._json([self._entry(repo, p) for p in form.get("paths", []) if self._exists(repo, p)])
            raise _HubError(404, "EntryNotFound", f"no such endpoint: {url.path}")
        kind, parts = (parts[0], parts[1:]) if parts[:1] and parts[0] in KINDS else ("models", parts)
        if len(parts) >= 5 and parts[2] == "resolve":
            self._revision(parts[3])
            return self._resolve(self._repo(kind, parts[0], parts[1]), "/".join(parts[4:]), head)
        raise _HubError(404, "EntryNotFound", f"no such endpoint: {url.path}")

    # -- endpoints ------------------------------------------------------------------------------
    def _repo(self, kind: str, org: str, name: str) -> Path:
        repo = self.hub.root / kind / org / name
        if ".." in (org, name) or not repo.is_dir():
            raise _HubError(404, "RepoNotFound", f"Repository {org}/{name} not found")
        return repo

    @staticmethod
    def _revision(revision: str) -> None:
        if unquote(revision) not in REVISIONS:
            raise _HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")

    @staticmethod
    def _file(repo: Path, path: str) -> Path:
        target = (repo / path).resolve()
        if not target.is_relative_to(repo.resolve()):
            raise _HubError(404, "EntryNotFound", f"{path} does not exist")
        return target

    def _exists(self, repo: Path, path: str) -> bool:
        return self._file(repo, path).exists()

    def _entry(self, repo: Path, path: str) -> dict[str, Any]:
        target = self._file(repo, path)
        rel = target.relative_to(repo.resolve()).as_posix()
        if target.is_dir():
            return {"type": "directory", "oid": _git_oid("tree", rel.encode()), "path": rel}
        data = target.read_bytes()
        return {"type": "file", "oid": _git_oid("blob", data), "size": len(data), "path": rel}

    def _repo_info(self, kind: str, repo: Path, head: bool) -> None:
        files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file())
        repo_id = f"{repo.parent.name}/{repo.name}"
        info = {
            "_id": repo_id,
            "id": repo_id,
            "author": repo.parent.name,
            "sha": COMMIT,
            "lastModified": _DATE,
            "createdAt": _DATE,
            "private": False,
            "gated": False,
            "disabled": False,
            "tags": [],
            "siblings": [{"rfilename": f} for f in files],
        }
        if kind == "models":
            info["modelId"] = repo_id
        self._json(info, head)

    def _tree(self, repo: Path, path: str, query: dict[str, list[str]], head: bool) -> None:
        folder = self._file(repo, path)
        if not folder.is_dir():
            raise _HubError(404, "EntryNotFound", f"{path} does not exist on 'main'")
        recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
        children = folder.rglob("*") if recursive else folder.iterdir()
        root = repo.resolve()
        # The Hub lists folders before files ("tree first"); clients sort anyway.
        entries = sorted(
            (self._entry(repo, c.resolve().relative_to(root).as_posix()) for c in children),
            key=lambda e: (e["type"] != "directory", e["path"]),
        )
        self._json(entries, head)

    def _resolve(self, repo: Path, path: str, head: bool) -> None:
        target = self._file(repo, path)
        if not target.is_file():
            raise _HubError(404, "EntryNotFound", f"{path} does not exist on 'main'")
        data = target.read_bytes()
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{_git_oid("blob", data)}"',
            "X-Repo-Commit": COMMIT,
        }
        spec = _RANGE.match(self.headers.get("Range", "").strip())
        if spec is None:
            return self._send(200, data, headers, head)
        first, last = spec.groups()
        size = len(data)
        if first:
            start, end = int(first), min(int(last) + 1, size) if last else size
        else:  # a suffix range: the last N bytes
            start, end = max(size - int(last or 0), 0), size
        if start >= size or start >= end:
            headers["Content-Range"] = f"bytes */{size}"
            return self._send(416, b"", headers, head)
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        self._send(206, data[start:end], headers, head)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.root = root
        self.log: list[str] = []


class HfHubServer:
    """The fake Hub in a background thread of this process (the fixture runs it as a subprocess).

    Args:
        root: the folder holding ``datasets/<org>/<name>/...`` repositories.
        port: the port to bind on 127.0.0.1; 0 picks a free one.
    """

    def __init__(self, root: str | Path, port: int = 0) -> None:
        self._server = _Server(Path(root), port)
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The URL to put in ``HF_ENDPOINT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def log(self) -> list[str]:
        """``METHOD path`` of every request served so far."""
        return self._server.log

    def start(self) -> HfHubServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="hf-hub-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> HfHubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve until killed; print the endpoint once listening."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", required=True, help="folder holding datasets/<org>/<name>/ repositories")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = a free one)")
    parser.add_argument("--verbose", action="store_true", help="print every request to stderr")
    args = parser.parse_args(argv)
    server = _Server(Path(args.root), args.port)
    if args.verbose:
        server.log = _EchoList()
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


class _EchoList(list[str]):
    def append(self, item: str) -> None:
        print(f"[{datetime.now(timezone.utc):%H:%M:%S.%f}] {item}", file=sys.stderr, flush=True)
        super().append(item)


if __name__ == "__main__":
    main()
