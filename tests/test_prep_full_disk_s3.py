"""optimize into S3 when the local staging disk fills up: the error names the staged file, the
chunks already uploaded are deleted from the bucket, and the staging folder is gone.

``TMPDIR`` (where a remote output's chunks are staged) is a real 1 MiB tmpfs mounted in a private
mount namespace (``unshare --user --map-root-user --mount``); the S3 server is the moto server on
127.0.0.1, reachable from the namespace since the network is shared.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from litdata_io import get_storage
from tests.servers import S3Server

pytestmark = pytest.mark.cloud

SCRIPT = """
import json, os, sys
from pathlib import Path
from litdata_io import get_storage
from litdata_prep import WorkerError, optimize

URL, OPTIONS, SEEN = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])


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


def test_a_full_staging_disk_names_the_file_and_removes_the_uploaded_chunks(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    unshare = shutil.which("unshare")
    assert unshare is not None, "this test needs util-linux's unshare to mount a small tmpfs"
    url = f"s3://{s3_bucket}/full"
    options = s3_server.storage_options()
    mount = tmp_path / "tmpdir"
    mount.mkdir()
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    seen = tmp_path / "seen.txt"
    command = 'mount -t tmpfs -o size=1m tmpfs "$1" && TMPDIR="$1" exec "$2" "$3" "$4" "$5" "$6"'
    arguments = [str(mount), sys.executable, str(script), url, json.dumps(options), str(seen)]
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", command, "sh", *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    error = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert error is not None and f"could not write {mount}/litdata-optimize-" in error, error
    assert ".bin: [Errno 28] No space left on device" in error and "TMPDIR" in error, error
    assert int(seen.read_text()) > 0  # chunks were in the bucket before the disk filled up ...
    assert [info.key for info in get_storage(url, options).list("")] == []  # ... and are gone
