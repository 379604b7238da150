"""Data under a bucket's mount is read from the bucket (a real S3 server, a mountinfo-format table).

Most tests make no mount: the mount table that names the mount is a file in the kernel's format
(``LITDATA_MOUNTINFO``), and the mount point an empty folder, so reading through it would find
nothing. One test makes a real s3fs mount of the bucket (it needs root for ``/dev/fuse`` and the
``s3fs`` program, which ``.ci/run`` installs) and reads the kernel's own mount table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from litdata import StreamingDataset, optimize
from tests.support import prep_e2e_fns as fns
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud


def _user_credentials(monkeypatch: pytest.MonkeyPatch, server: S3Server) -> None:
    # The user's ambient credentials: no storage_options are passed to the dataset.
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", server.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", server.region)
    monkeypatch.setenv("AWS_REGION", server.region)


def _mount_table(tmp_path: Path, mountpoint: Path, fstype: str, source: str) -> Path:
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        f"140 22 0:61 / {mountpoint} rw,nosuid,nodev,relatime shared:40 - {fstype} {source} rw,user_id={os.getuid()}\n"
    )
    return table


def test_a_dataset_on_a_goofys_mount_streams_from_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server, s3_bucket: str
) -> None:
    optimize(fns.compress, list(range(40)), f"s3://{s3_bucket}/team/ds", chunk_size=8, num_workers=1,
             storage_options=s3_server.storage_options(), verbose=False)  # fmt: skip
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    monkeypatch.setenv("LITDATA_MOUNTINFO", str(_mount_table(tmp_path, mountpoint, "fuse.goofys", f"{s3_bucket}:team")))
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "cache"))
    _user_credentials(monkeypatch, s3_server)
    dataset = StreamingDataset(str(mountpoint / "ds"))
    assert sorted(dataset) == [(i, i**2) for i in range(40)]
    assert any((tmp_path / "cache").rglob("*.bin"))  # the chunks came through the cache, from the bucket


def test_a_dataset_on_a_mountpoint_s3_mount_streams_from_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server, s3_bucket: str
) -> None:
    optimize(fns.compress, list(range(30)), f"s3://{s3_bucket}/pre/ds", chunk_size=8, num_workers=1,
             storage_options=s3_server.storage_options(), verbose=False)  # fmt: skip
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    monkeypatch.setenv("LITDATA_MOUNTINFO", str(_mount_table(tmp_path, mountpoint, "fuse", "mountpoint-s3")))
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "cache"))
    _user_credentials(monkeypatch, s3_server)
    # mountpoint-s3's mount source names only the tool; its daemon's command line names the bucket.
    daemon = subprocess.Popen(
        ["mount-s3", "-c", "import time; time.sleep(60)", "--prefix", "pre/", s3_bucket, str(mountpoint)],
        executable=sys.executable,
    )
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{daemon.pid}/cmdline").read_bytes().startswith(b"mount-s3\0"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        dataset = StreamingDataset(str(mountpoint / "ds"))
        assert sorted(dataset) == [(i, i**2) for i in range(30)]
    finally:
        daemon.kill()
        daemon.wait()


def test_a_mapped_studio_connection_streams_from_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server, s3_bucket: str
) -> None:
    optimize(fns.compress, list(range(20)), f"s3://{s3_bucket}/optimized", chunk_size=8, num_workers=1,
             storage_options=s3_server.storage_options(), verbose=False)  # fmt: skip
    monkeypatch.setenv("LITDATA_MOUNTS", f"/teamspace/s3_connections/my-data=s3://{s3_bucket}")
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "cache"))
    _user_credentials(monkeypatch, s3_server)
    dataset = StreamingDataset("/teamspace/s3_connections/my-data/optimized")
    assert sorted(dataset) == [(i, i**2) for i in range(20)]


def _fuse_unavailable() -> str | None:
    """Why this machine cannot make a real s3fs mount (None: it can). ``.ci/run`` installs s3fs."""
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "a FUSE mount needs /dev/fuse, which only root may open here"
    if shutil.which("s3fs") is None:
        return "s3fs is not installed (.ci/run installs it: apt-get install s3fs)"
    return None


def test_a_dataset_on_a_real_s3fs_mount_streams_from_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server, s3_bucket: str
) -> None:
    why = _fuse_unavailable()
    if why is not None:
        pytest.skip(why)
    optimize(fns.compress, list(range(40)), f"s3://{s3_bucket}/team/ds", chunk_size=8, num_workers=1,
             storage_options=s3_server.storage_options(), verbose=False)  # fmt: skip
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    secrets = tmp_path / "s3fs-passwd"
    secrets.write_text(f"{s3_server.access_key}:{s3_server.secret_key}\n")
    secrets.chmod(0o600)
    # A real mount: s3fs's daemon serves the bucket at the mount point, listed in /proc/self/mountinfo
    # as "fuse.s3fs s3fs" (the source names no bucket: its command line does).
    subprocess.run(
        ["s3fs", s3_bucket, str(mountpoint), "-o", f"url={s3_server.endpoint}", "-o", "use_path_request_style",
         "-o", f"passwd_file={secrets}"],
        check=True, timeout=60,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (mountpoint / "team" / "ds" / "index.json").is_file():
            assert time.monotonic() < deadline, "the s3fs mount did not show the bucket's files"
            time.sleep(0.1)
        assert f" {mountpoint} " in Path("/proc/self/mountinfo").read_text()
        monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "cache"))
        _user_credentials(monkeypatch, s3_server)
        dataset = StreamingDataset(str(mountpoint / "team" / "ds"))
        assert sorted(dataset) == [(i, i**2) for i in range(40)]
        # Read from the bucket through the cache, not mapped in place through the mount.
        assert any((tmp_path / "cache").rglob("*.bin"))
    finally:
        subprocess.run(["umount", str(mountpoint)], check=False, timeout=60)
    assert not Path("/proc/self/mountinfo").read_text().count(f" {mountpoint} ")
