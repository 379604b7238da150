"""optimize on a disk that fills up: the error names the file and the OS error, and nothing is left.

The full disk is a real one: a 1 MiB tmpfs mounted in a private mount namespace
(``unshare --user --map-root-user --mount``, so no root is needed and the mount vanishes with the
process). The job writes about 4 MB, so a chunk write fails with ENOSPC part-way through, after
other chunks were already published into the output folder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litdata_prep import WorkerError, optimize

SCRIPT = """
import json, os, subprocess, sys
from pathlib import Path
from litdata_format import DatasetReader
from litdata_prep import WorkerError, optimize

MOUNT, SEEN, MODE = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
OUT = MOUNT / "out"


def blob(i):
    with open(SEEN, "a") as seen:  # how many chunks the output held while the job ran (not on the tmpfs)
        seen.write(f"{len(list(OUT.glob('chunk-*.bin')))}\\n")
    return {"i": i, "data": os.urandom(20_000)}


def run():
    optimize(blob, list(range(200)), str(OUT), chunk_bytes="100KB", num_workers=2, verbose=False,
             use_checkpoint=MODE == "checkpoint")


if __name__ == "__main__":
    result = {}
    try:
        run()
    except WorkerError as err:
        result["error"] = str(err)
    result["left"] = sorted(str(p.relative_to(MOUNT)) for p in MOUNT.rglob("*") if p.is_file())
    if MODE == "checkpoint":  # the disk grows: the same job resumes from what was published
        subprocess.run(["mount", "-o", "remount,size=16m", str(MOUNT)], check=True)
        run()
        result["resumed"] = sorted(sample["i"] for sample in DatasetReader(OUT))
    print(json.dumps(result))
"""


def _on_a_full_disk(tmp_path: Path, mode: str) -> dict[str, Any]:
    unshare = shutil.which("unshare")
    assert unshare is not None, "this test needs util-linux's unshare to mount a small tmpfs"
    mount = tmp_path / "mnt"
    mount.mkdir()
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    seen = tmp_path / "seen.txt"
    command = 'mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" "$3" "$1" "$4" "$5"'
    arguments = [str(mount), sys.executable, str(script), str(seen), mode]
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", command, "sh", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["most_chunks_seen"] = max(int(line) for line in seen.read_text().split())
    return result


def test_a_full_disk_names_the_file_and_the_os_error_and_leaves_nothing(tmp_path: Path) -> None:
    result = _on_a_full_disk(tmp_path, "plain")
    error = result["error"]
    assert "could not write " in error and "/out/.litdata-staging-0/rank-" in error, error
    assert ".bin: [Errno 28] No space left on device" in error, error
    assert "fn raised" not in error and "refused" not in error, error
    assert result["most_chunks_seen"] > 0  # chunks were published before the disk filled up ...
    assert result["left"] == []  # ... and removed with every temporary file when the job failed


def test_with_checkpoints_a_full_disk_keeps_what_was_published_for_the_next_run(tmp_path: Path) -> None:
    result = _on_a_full_disk(tmp_path, "checkpoint")
    assert "No space left on device" in result["error"]
    assert any(name.startswith("out/chunk-") for name in result["left"])
    assert not any(".litdata-staging" in name or name.endswith(".tmp") for name in result["left"])
    assert result["resumed"] == list(range(200))


def test_a_sample_the_writer_refuses_is_not_blamed_on_fn(tmp_path: Path) -> None:
    import prep_fns

    with pytest.raises(WorkerError) as caught:
        optimize(prep_fns.vector_then_matrix, list(range(8)), tmp_path / "out", chunk_size=2, num_workers=1,
                 start_method="fork", verbose=False)  # fmt: skip
    message = str(caught.value)
    assert "a sample fn returned was refused for input 5 (position 5" in message, message
    assert "sample 5, leaf 1 (sample['v']): a 2-D array" in message, message
    assert not list((tmp_path / "out").glob("chunk-*")), "the chunks written before the error are removed"
