"""Run a script with a small real disk: a tmpfs mounted in a private mount namespace.

``unshare --user --map-root-user --mount`` needs no root, and the mount vanishes with the script.
Used by the tests of a disk that fills up under ``optimize`` (``test_prep_full_disk.py``) and under
the chunk cache (``test_stream_full_disk.py``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["on_a_small_disk"]


def on_a_small_disk(tmp_path: Path, job: str, *args: str, tmpdir: bool = False, size: str = "1m") -> dict[str, Any]:
    """Run ``job`` (a script) with the mount point and ``args``, a tmpfs of ``size`` (1 MiB) mounted there.

    Returns the script's last line of output, as JSON, with the mount point under ``"mount"`` and
    what it wrote to stderr under ``"stderr"``. With ``tmpdir``, ``TMPDIR`` is the mount point.
    """
    unshare = shutil.which("unshare")
    assert unshare is not None, "this test needs util-linux's unshare to mount a small tmpfs"
    # A short mount point: a forkserver's socket lives under TMPDIR, and an AF_UNIX path is at most
    # 107 bytes (pytest-xdist's tmp_path alone can be longer than that with a socket name added).
    mount = Path(tempfile.mkdtemp(prefix="ld-disk-"))
    script = tmp_path / "job.py"
    script.write_text(job)
    env = 'TMPDIR="$m" ' if tmpdir else ""
    command = 'm="$1" py="$2" job="$3" size="$4" && shift 4 && mount -t tmpfs -o size="$size" tmpfs "$m" && '
    command += f'{env}exec "$py" "$job" "$m" "$@"'
    arguments = [str(mount), sys.executable, str(script), size, *args]
    try:
        done = subprocess.run(
            [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", command, "sh", *arguments],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        shutil.rmtree(mount, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "mount": str(mount), "stderr": done.stderr}
