"""Run a command in a network namespace of its own, with chosen addresses bridged to servers outside.

Some credential endpoints sit at fixed link-local addresses (ECS's ``169.254.170.2:80``) that a
test cannot bind on the machine's loopback. ``unshare -rn`` (an unprivileged user + network
namespace) gives a process a loopback interface of its own, on which it is root: there it can add
``169.254.170.2`` and listen on port 80. The servers (moto, the signing checker, the stand-ins)
stay in the test process; the namespace reaches them through Unix sockets, which are files and so
cross network namespaces:

- outside, :class:`Bridge` accepts on ``<folder>/<port>.sock`` and connects to ``127.0.0.1:<port>``;
- inside, ``python -m tests.support.netns SPEC -- COMMAND...`` listens on each ``host:port`` the spec names,
  relays every connection to its socket file, runs COMMAND and exits with its status.

Inside, ``127.0.0.1:<port>`` is bridged to the same port outside, so URLs need no rewriting. A
fixed host name (Google's ``accounts.google.com`` token URL) is pointed at 127.0.0.1 by
bind-mounting a hosts file over ``/etc/hosts`` in a mount namespace of the same process. No packet
leaves a loopback interface.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["Bridge", "command_in_namespace"]


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy bytes one way until the source ends, then pass the end on."""
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def _relay(client: socket.socket, target: socket.socket) -> None:
    back = threading.Thread(target=_pump, args=(target, client), daemon=True)
    back.start()
    _pump(client, target)
    back.join()
    client.close()
    target.close()


def _serve(listener: socket.socket, connect: Sequence[object], family: int) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return  # closed
        target = socket.socket(family, socket.SOCK_STREAM)
        try:
            target.connect(tuple(connect) if family == socket.AF_INET else str(connect[0]))
        except OSError:
            client.close()
            target.close()
            continue
        threading.Thread(target=_relay, args=(client, target), daemon=True).start()


class Bridge:
    """Unix sockets in ``folder`` that lead to TCP ports on this machine's 127.0.0.1 (a context manager).

    Args:
        folder: where the socket files go (short: a Unix socket path has a ~100 byte limit).
        ports: the 127.0.0.1 ports to reach.
    """

    def __init__(self, folder: Path, ports: Sequence[int]) -> None:
        self.folder = folder
        self._listeners: list[socket.socket] = []
        for port in ports:
            path = folder / f"{port}.sock"
            path.unlink(missing_ok=True)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            listener.listen(64)
            self._listeners.append(listener)
            threading.Thread(target=_serve, args=(listener, ("127.0.0.1", port), socket.AF_INET), daemon=True).start()

    def socket_for(self, port: int) -> str:
        """The socket file leading to ``127.0.0.1:port``."""
        return str(self.folder / f"{port}.sock")

    def __enter__(self) -> Bridge:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for listener in self._listeners:
            listener.close()


def command_in_namespace(
    bridge: Bridge,
    listen: Mapping[str, int],
    command: Sequence[str],
    addresses: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> list[str]:
    """The argv that runs ``command`` in a new network namespace, reaching ``bridge``'s ports.

    Args:
        bridge: the outside end.
        listen: ``"host:port"`` inside -> the 127.0.0.1 port outside it leads to.
        command: what to run inside.
        addresses: extra addresses to give the namespace's loopback (e.g. ``169.254.170.2``).
        hosts: host names that resolve to 127.0.0.1 inside.

    Raises:
        RuntimeError: ``unshare`` or ``ip`` is not installed.
    """
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not installed (util-linux / iproute2); the namespace tests need it")
    spec = {inside: bridge.socket_for(port) for inside, port in listen.items()}
    setup = "ip link set lo up" + "".join(f" && ip addr add {address}/32 dev lo" for address in addresses)
    unshare = ["unshare", "--user", "--map-root-user", "--net"]
    if hosts:
        hosts_file = bridge.folder / "hosts"
        hosts_file.write_text("127.0.0.1 localhost " + " ".join(hosts) + "\n")
        setup += f" && mount --bind {hosts_file} /etc/hosts"
        unshare.append("--mount")
    inner = [sys.executable, "-m", "tests.support.netns", json.dumps(spec), "--", *command]
    return [*unshare, "sh", "-c", f'{setup} && exec "$@"', "sh", *inner]


def _main(argv: Sequence[str]) -> int:
    spec: dict[str, str] = json.loads(argv[0])
    command = list(argv[argv.index("--") + 1 :])
    for inside, path in spec.items():
        host, port = inside.rsplit(":", 1)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, int(port)))
        listener.listen(64)
        threading.Thread(target=_serve, args=(listener, (path,), socket.AF_UNIX), daemon=True).start()
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
