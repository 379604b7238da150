"""What the credential tests share: the objects they seed, a clean environment, running the driver.

The driver (``tests/cred_driver.py``) runs in a fresh process whose environment holds one credential
source and no keys; optionally in a network namespace of its own (``tests/netns.py``), for
endpoints at fixed addresses or host names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.cred_driver import N
from tests.netns import Bridge, command_in_namespace

__all__ = ["ROOT", "clean_environment", "objects", "port_of", "run_driver"]

ROOT = Path(__file__).resolve().parents[1]


def objects(local: Path) -> dict[str, bytes]:
    """The dataset (``data/``) and the raw files (``raw/``), by key."""
    from litdata_format import BinaryWriter

    writer = BinaryWriter(local, chunk_size=4)
    for i in range(N):
        writer.add_item(i, {"index": i})
    writer.done()
    writer.merge()
    found = {f"data/{path.name}": path.read_bytes() for path in sorted(local.iterdir())}
    found.update({f"raw/{i:03d}.json": json.dumps({"i": i}).encode() for i in range(N)})
    return found


def clean_environment(home: Path) -> dict[str, str]:
    """No cloud settings from outside, no proxies, no CA settings, an empty HOME."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "UV_CACHE_DIR", "VIRTUAL_ENV")
    home.mkdir(exist_ok=True)
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
    }


def port_of(endpoint: str) -> int:
    """The port of ``http(s)://host:port``."""
    return int(endpoint.rsplit(":", 1)[1].rstrip("/"))


def run_driver(
    spec: dict[str, Any],
    env: dict[str, str],
    namespace: Mapping[str, int] | None = None,
    hosts: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the driver; its results by phase.

    Args:
        spec: the driver's spec.
        env: its whole environment.
        namespace: run it in a network namespace whose ``"host:port"`` listeners lead to these
            127.0.0.1 ports outside (None: run it here).
        hosts: host names that resolve to 127.0.0.1 in the namespace.
    """
    command = [sys.executable, "-m", "tests.cred_driver", json.dumps(spec)]
    if namespace is None:
        return _run(spec, command, env)
    with (
        tempfile.TemporaryDirectory(prefix="ns-") as folder,
        Bridge(Path(folder), sorted(set(namespace.values()))) as bridge,
    ):
        addresses = sorted({inside.rsplit(":", 1)[0] for inside in namespace} - {"127.0.0.1"})
        return _run(spec, command_in_namespace(bridge, namespace, command, addresses, hosts), env)


def _run(spec: dict[str, Any], command: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        command,
        check=False,  # the assertion below shows the driver's stderr
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    print(spec["source"], {phase: result["seconds"] for phase, result in results.items()})
    return results
