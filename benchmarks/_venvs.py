"""The peers' side virtual environments, built once with uv under ``.side-venvs/``.

* ``bench-litdata-0.2.76``: the real upstream LitData. Its S3 chunk downloads go through obstore,
  which refuses plain ``http://`` endpoints unless ``allow_http`` is set; the suite keeps obstore and
  sets ``AWS_ALLOW_HTTP=true`` in that peer's environment (obstore reads ``AWS_*`` client options
  from the environment), so upstream runs its shipped code path against the local server.
* ``bench-mosaic-0.13.0``: MosaicML Streaming. PyPI's torchvision wheels do not import beside the
  CPU torch build used here, so torchvision is kept out (an override with a marker that never
  matches) and an empty stand-in package is written into the venv; Mosaic imports it at import
  time but uses nothing from it for these workloads.

torch is pinned to the version of this environment so uv links it from its cache.

``--baseline REV`` adds a third kind: this repository at another commit (a detached git worktree
under ``.side-venvs/baseline-<sha>`` with its own ``uv sync --locked`` venv), run by the same
runner code as ours, so a change is measured before and after in the same run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

__all__ = ["SIDE_VENVS", "Baseline", "Peer", "build_baseline", "build_peer", "peer_python"]

ROOT = Path(__file__).resolve().parents[1]
SIDE_VENVS = ROOT / ".side-venvs"
UPSTREAM_VERSION = "0.2.76"
MOSAIC_VERSION = "0.13.0"

_DOC = '"""A stand-in for torchvision (its wheels do not import beside the CPU torch here)."""\n'
_UNAVAILABLE = (
    "\n\ndef _unavailable(*args, **kwargs):\n"
    "    raise ImportError('torchvision is a stand-in in this benchmark venv')\n"
)
# What MosaicML Streaming imports from torchvision at import time (streaming/vision/*), and no more.
_VISION_STANDIN = {
    "__init__.py": _DOC,
    "datasets/__init__.py": _DOC + "\n\nclass VisionDataset:\n    pass\n\n\nclass CIFAR10:\n    pass\n",
    "transforms/__init__.py": _DOC,
    "transforms/functional.py": _DOC + _UNAVAILABLE + "\n\nto_tensor = _unavailable\n",
}


@dataclass(frozen=True)
class Peer:
    """A library benchmarked from its own venv.

    Attributes:
        name: the library's short name in the results (``upstream``, ``mosaic``).
        venv: the venv folder.
        packages: what uv installs (torch is added, pinned).
        marker: bump its name when ``packages`` change, to rebuild.
        no_torchvision: keep torchvision out and write the empty stand-in.
    """

    name: str
    venv: Path
    packages: tuple[str, ...]
    marker: str
    no_torchvision: bool = False


PEERS = {
    "upstream": Peer(
        "upstream",
        SIDE_VENVS / f"bench-litdata-{UPSTREAM_VERSION}",
        (f"litdata=={UPSTREAM_VERSION}", "pillow", "boto3", "numpy", "zstd"),  # zstd: StreamingRawDataset's index
        ".ready-2",
    ),
    "mosaic": Peer(
        "mosaic",
        SIDE_VENVS / f"bench-mosaic-{MOSAIC_VERSION}",
        (f"mosaicml-streaming=={MOSAIC_VERSION}", "pillow", "boto3", "numpy"),
        ".ready-2",
        no_torchvision=True,
    ),
}


def _uv() -> str:
    found = shutil.which("uv")
    if found is None:
        raise RuntimeError("uv is needed to build the peers' venvs: python3 -m pip install uv")
    return found


def peer_python(name: str) -> Path:
    """The python of peer ``name``'s venv (not built by this call)."""
    return PEERS[name].venv / "bin" / "python"


def _site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def build_peer(name: str, *, log: bool = True) -> Path:
    """Build peer ``name``'s venv if it is missing or stale; return its python."""
    peer = PEERS[name]
    python = peer_python(name)
    if (peer.venv / peer.marker).exists():
        return python
    if log:
        print(f"[venv] building {peer.venv.relative_to(ROOT)} ...", flush=True)
    torch_version = version("torch").split("+")[0]
    uv = _uv()
    subprocess.run([uv, "venv", "-q", "--allow-existing", "--python", sys.executable, str(peer.venv)], check=True)
    command = [uv, "pip", "install", "-q", "--python", str(python), *peer.packages, f"torch=={torch_version}"]
    if peer.no_torchvision:
        overrides = peer.venv / "overrides.txt"
        overrides.write_text("torchvision; sys_platform == 'never'\n")
        command += ["--overrides", str(overrides)]
    subprocess.run(command, check=True)
    if peer.no_torchvision:
        site = _site_packages(python)
        for relative, text in _VISION_STANDIN.items():
            target = site / "torchvision" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    for old in peer.venv.glob(".ready-*"):
        old.unlink()
    (peer.venv / peer.marker).touch()
    return python


@dataclass(frozen=True)
class Baseline:
    """This repository at another commit, benchmarked as the library ``baseline``.

    Attributes:
        rev: the revision as the user named it.
        sha: the commit it names.
        python: the python of its venv.
    """

    rev: str
    sha: str
    python: Path

    @property
    def title(self) -> str:
        """How the report names it."""
        short = self.sha[:10]
        return f"ours at {short}" if self.rev.startswith(short[:7]) else f"ours at {self.rev} ({short})"


def build_baseline(rev: str, *, log: bool = True) -> Baseline:
    """A worktree of this repository at ``rev`` with its own venv, built once; what runs it.

    Raises:
        SystemExit: ``rev`` names no commit of this repository.
    """
    command = ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"]
    found = subprocess.run(command, check=False, capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(f"--baseline {rev}: not a commit of this repository (git rev-parse found nothing)")
    sha = found.stdout.strip()
    folder = SIDE_VENVS / f"baseline-{sha[:12]}"
    python = folder / ".venv" / "bin" / "python"
    marker = folder / ".bench-ready"
    if not marker.exists():
        if log:
            print(f"[venv] building {folder.relative_to(ROOT)} (ours at {rev}) ...", flush=True)
        if not (folder / ".git").exists():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=True)
            command = ["git", "-C", str(ROOT), "worktree", "add", "--force", "--detach", str(folder), sha]
            subprocess.run(command, check=True, capture_output=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
        subprocess.run([_uv(), "sync", "--locked", "-q", "--directory", str(folder)], check=True, env=env)
        marker.touch()
    return Baseline(rev, sha, python)


if __name__ == "__main__":  # build all: python -m benchmarks._venvs
    for peer_name in PEERS:
        print(peer_name, build_peer(peer_name))
    print("purelib of this interpreter:", sysconfig.get_paths()["purelib"])
