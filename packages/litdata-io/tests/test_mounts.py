"""A path on a bucket's FUSE mount resolves to the bucket's URL (mount tables in the kernel's mountinfo format)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from litdata_io import Dir, _mounts, _resolver, register_mount, resolve_dir

# Lines as the kernel writes them (man 5 proc): id parent maj:min root mountpoint opts [tags] - type source superopts.
_ROOT = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"


def _line(index: int, mountpoint: Path | str, fstype: str, source: str, root: str = "/") -> str:
    escaped = str(mountpoint).replace(" ", "\\040")
    head = f"{100 + index} 22 0:{50 + index} {root} {escaped} rw,nosuid,nodev,relatime shared:{index}"
    return f"{head} - {fstype} {source} rw,user_id=1000,group_id=1000\n"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mounts, "_registered", {})
    monkeypatch.setattr(_mounts, "_noticed", set())
    monkeypatch.setattr(_resolver, "_noticed", set())
    monkeypatch.delenv("LITDATA_MOUNTS", raising=False)
    monkeypatch.delenv("LIGHTNING_CLOUD_PROJECT_ID", raising=False)


def _table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *lines: str) -> Path:
    table = tmp_path / "mountinfo"
    table.write_text(_ROOT + "".join(lines))
    monkeypatch.setenv("LITDATA_MOUNTINFO", str(table))
    return table


def test_mountinfo_lines_parse(tmp_path: Path) -> None:
    text = _ROOT + _line(1, "/mnt/my data", "fuse.gcsfuse", "my-bucket") + "garbage line\n"
    entries = _mounts.parse_mountinfo(text)
    assert [(e.mountpoint, e.fstype, e.source) for e in entries] == [
        ("/", "ext4", "/dev/sda1"),
        ("/mnt/my data", "fuse.gcsfuse", "my-bucket"),
    ]
    # Optional tags between the options and the dash are skipped.
    entries = _mounts.parse_mountinfo("36 35 98:0 /sub /mnt2 rw master:1 shared:2 - fuse.goofys b:p rw\n")
    assert entries[0].root == "/sub" and entries[0].source == "b:p"


@pytest.mark.parametrize(
    ("fstype", "source", "url"),
    [
        ("fuse.gcsfuse", "my-bucket", "gs://my-bucket/data/train"),
        ("fuse.goofys", "my-bucket:pre/fix", "s3://my-bucket/pre/fix/data/train"),
        ("fuse.goofys", "my-bucket", "s3://my-bucket/data/train"),
        ("fuse.rclone", ":s3:my-bucket/base", "s3://my-bucket/base/data/train"),
        ("fuse.rclone", "gremote:gbucket", "gs://gbucket/data/train"),
    ],
)
def test_a_mount_source_names_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fstype: str, source: str, url: str
) -> None:
    (tmp_path / "rclone.conf").write_text("[gremote]\ntype = google cloud storage\n")
    monkeypatch.setenv("RCLONE_CONFIG", str(tmp_path / "rclone.conf"))
    mnt = tmp_path / "mnt"
    _table(tmp_path, monkeypatch, _line(1, mnt, fstype, source))
    assert resolve_dir(str(mnt / "data/train")) == Dir(path=None, url=url)
    assert resolve_dir(f"local:{mnt}/data").url == f"local:{mnt}/data"  # the opt-out: through the mount


def test_a_bind_mount_of_a_subfolder_adds_its_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _table(tmp_path, monkeypatch, _line(1, tmp_path / "m", "fuse.gcsfuse", "bkt", root="/shard/a"))
    assert resolve_dir(str(tmp_path / "m/x")).url == "gs://bkt/shard/a/x"


def test_other_filesystems_stay_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nfs, tmpfs = _line(1, tmp_path / "nfs", "nfs4", "server:/export"), _line(2, tmp_path, "tmpfs", "tmpfs")
    _table(tmp_path, monkeypatch, nfs, tmpfs)
    assert resolve_dir(str(tmp_path / "nfs/a")) == Dir(path=str(tmp_path / "nfs/a"), url=None)
    assert resolve_dir(str(tmp_path / "b")) == Dir(path=str(tmp_path / "b"), url=None)


def _mounted_by(argv: list[str], tmp_path: Path) -> list[str]:
    return [arg.replace("MNT", str(tmp_path / "mnt")).replace("CFG", str(tmp_path / "blob.yaml")) for arg in argv]


@pytest.mark.parametrize(
    ("source", "argv", "url"),
    [
        ("mountpoint-s3", ["mount-s3", "--prefix", "pre/", "train-bucket", "MNT"], "s3://train-bucket/pre/ds"),
        ("mountpoint-s3", ["mount-s3", "train-bucket", "MNT", "--read-only"], "s3://train-bucket/ds"),
        ("s3fs", ["s3fs", "train-bucket:/deep", "MNT", "-o", "allow_other"], "s3://train-bucket/deep/ds"),
        ("s3fs", ["s3fs", "MNT", "-o", "bucket=other-bucket,use_path_request_style"], "s3://other-bucket/ds"),
        ("blobfuse2", ["blobfuse2", "mount", "MNT", "--config-file=CFG"], "azure://blobs/ds"),
    ],
)
def test_a_mount_named_by_its_tool_is_found_from_the_daemon_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, argv: list[str], url: str
) -> None:
    (tmp_path / "blob.yaml").write_text("azstorage:\n  type: block\n  account-name: acct\n  container: blobs\n")
    _table(tmp_path, monkeypatch, _line(1, tmp_path / "mnt", "fuse", source))
    proc = subprocess.Popen(
        [*_mounted_by(argv, tmp_path)[:1], "-c", "import time; time.sleep(60)", *_mounted_by(argv, tmp_path)[1:]],
        executable=sys.executable,
    )
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] != argv[0].encode():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert resolve_dir(str(tmp_path / "mnt/ds")) == Dir(path=None, url=url)
    finally:
        proc.kill()
        proc.wait()


def test_an_unknown_bucket_is_read_through_the_mount_with_one_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _table(tmp_path, monkeypatch, _line(1, tmp_path / "mnt", "fuse", "mountpoint-s3"))  # no daemon to ask
    with caplog.at_level(logging.WARNING, logger="litdata_io"):
        assert resolve_dir(str(tmp_path / "mnt/a")) == Dir(path=str(tmp_path / "mnt/a"), url=None)
        assert resolve_dir(str(tmp_path / "mnt/b")).url is None
    notices = [r.getMessage() for r in caplog.records if "read through the mount" in r.getMessage()]
    assert len(notices) == 1 and "LITDATA_MOUNTS=" in notices[0] and "register_mount" in notices[0]


def test_the_documented_mapping_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _table(tmp_path, monkeypatch, _line(1, tmp_path / "mnt", "fuse.gcsfuse", "from-table"))
    monkeypatch.setenv("LITDATA_MOUNTS", f"{tmp_path}/mnt=s3://from-env/p; /data/x = gs://other")
    assert resolve_dir(str(tmp_path / "mnt/ds")).url == "s3://from-env/p/ds"
    assert resolve_dir("/data/x/y").url == "gs://other/y"
    register_mount(tmp_path / "mnt", "r2://from-call/")
    assert resolve_dir(str(tmp_path / "mnt/ds")).url == "r2://from-call/ds"
    assert resolve_dir(str(tmp_path / "mnt")).url == "r2://from-call"
    with pytest.raises(ValueError, match="must be s3://"):
        register_mount("/x", "/not/a/url")
    monkeypatch.setenv("LITDATA_MOUNTS", "/x")
    with pytest.raises(ValueError, match="LITDATA_MOUNTS entry '/x'"):
        resolve_dir("/x/y")


def test_studio_paths_map_or_read_through_their_mount(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _table(tmp_path, monkeypatch)
    monkeypatch.setenv("LITDATA_MOUNTS", "/teamspace/s3_connections/imagenet=s3://imagenet-bucket/v1")
    assert resolve_dir("/teamspace/s3_connections/imagenet/train").url == "s3://imagenet-bucket/v1/train"
    with pytest.raises(ValueError, match="LITDATA_MOUNTS"):
        resolve_dir("/teamspace/gcs_connections/unmapped/x")  # not mounted here: nothing to read


def test_studio_connections_come_from_the_studio_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No Lightning platform is reachable offline, so a stand-in ``lightning_sdk`` (the client's
    # documented shape: data connections with a name and a per-cloud ``source``) plays the Studio.
    package = tmp_path / "sdk" / "lightning_sdk" / "lightning_cloud"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "rest_client.py").write_text(
        "from types import SimpleNamespace as N\n"
        "class LightningClient:\n"
        "    def __init__(self, max_tries):\n"
        "        pass\n"
        "    def data_connection_service_list_data_connections(self, project):\n"
        "        assert project == 'proj-1'\n"
        "        return N(data_connections=[N(name='imagenet', aws=N(source='s3://studio-bucket/imagenet/')),\n"
        "                                   N(name='web', gcp=N(source='gs://g-bucket'))])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "sdk"))
    _table(tmp_path, monkeypatch)
    monkeypatch.setenv("LIGHTNING_CLOUD_PROJECT_ID", "proj-1")
    assert resolve_dir("/teamspace/s3_connections/imagenet/train").url == "s3://studio-bucket/imagenet/train"
    assert resolve_dir("/teamspace/gcs_connections/web").url == "gs://g-bucket"
    for name in [m for m in sys.modules if m.startswith("lightning_sdk")]:
        monkeypatch.delitem(sys.modules, name)
