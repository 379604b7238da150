"""optimize on a disk that fills up: the error names the file and the OS error, and nothing is left.

The full disk is a real one: a 1 MiB tmpfs mounted in a private mount namespace
(``unshare --user --map-root-user --mount``, so no root is needed and the mount vanishes with the
job). Locally the output folder is on it; for an S3 output (the moto server on 127.0.0.1, reachable
since the network is shared) ``TMPDIR``, where chunks are staged before upload, is on it. Each job
writes more than 1 MiB, so a chunk write fails with ENOSPC part-way through, after other chunks were
already published.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from litdata_io import get_storage
from tests.support.servers import S3Server
from tests.support.small_disk import on_a_small_disk

LOCAL_JOB = """
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


S3_JOB = """
import json, os, sys
from pathlib import Path
from litdata_io import get_storage
from litdata_prep import WorkerError, optimize

URL, OPTIONS, SEEN = sys.argv[2], json.loads(sys.argv[3]), Path(sys.argv[4])


def blob(i):
    if i == 40:  # the chunks uploaded so far (the upload backlog of 4 makes that at least 6)
        keys = [info.key for info in get_storage(URL, OPTIONS).list("")]
        SEEN.write_text(str(len([k for k in keys if k.endswith(".bin")])))
    # From input 40 on, each sample is a 2 MB chunk of its own: more than the staging disk holds.
    return {"i": i, "data": os.urandom(2_000_000 if i >= 40 else 20_000)}


if __name__ == "__main__":
    try:
        optimize(blob, list(range(60)), URL, chunk_bytes="100KB", num_workers=1, keep_data_ordered=True,
                 storage_options=OPTIONS, verbose=False)
        print(json.dumps({"error": None}))
    except WorkerError as err:
        print(json.dumps({"error": str(err)}))
"""


def _local_job(tmp_path: Path, mode: str) -> dict[str, Any]:
    seen = tmp_path / "seen.txt"
    result = on_a_small_disk(tmp_path, LOCAL_JOB, str(seen), mode)
    result["most_chunks_seen"] = max(int(line) for line in seen.read_text().split())
    return result


def test_a_full_disk_names_the_file_and_the_os_error_and_leaves_nothing(tmp_path: Path) -> None:
    result = _local_job(tmp_path, "plain")
    error = result["error"]
    assert "could not write " in error and "/out/.litdata-staging-0/" in error, error
    assert ".bin: [Errno 28] No space left on device" in error, error
    assert "fn raised" not in error and "refused" not in error, error
    assert result["most_chunks_seen"] > 0  # chunks were published before the disk filled up ...
    assert result["left"] == []  # ... and removed with every temporary file when the job failed


def test_with_checkpoints_a_full_disk_keeps_what_was_published_for_the_next_run(tmp_path: Path) -> None:
    result = _local_job(tmp_path, "checkpoint")
    assert "No space left on device" in result["error"]
    assert any(name.startswith("out/chunk-") for name in result["left"])
    assert not any(".litdata-staging" in name or name.endswith(".tmp") for name in result["left"])
    assert result["resumed"] == list(range(200))


@pytest.mark.cloud
def test_a_full_staging_disk_names_the_file_and_removes_the_uploaded_chunks(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    url = f"s3://{s3_bucket}/full"
    options = s3_server.storage_options()
    seen = tmp_path / "seen.txt"
    result = on_a_small_disk(tmp_path, S3_JOB, url, json.dumps(options), str(seen), tmpdir=True)
    error = result["error"]
    assert error is not None and f"could not write {result['mount']}/litdata-optimize-" in error, error
    assert ".bin: [Errno 28] No space left on device" in error and "TMPDIR" in error, error
    assert int(seen.read_text()) > 0  # chunks were in the bucket before the disk filled up ...
    assert [info.key for info in get_storage(url, options).list("")] == []  # ... and are gone
