"""Temporary files held alive by their owner, and the sweep of those a killed owner left (``_owned``).

Real processes: a child makes a file with ``owned_file`` and is killed with SIGKILL; the file
stays, and the next ``owned_file`` of that kind in the folder (here, or in a fresh process)
deletes it, while files whose owners (or the children they forked) still live are kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from litdata_io.internal import lifetime_locks, owned_file, record_lock, sweep_orphans

pytestmark = pytest.mark.skipif(not lifetime_locks(), reason="lifetime locks need Linux's OFD locks")

# Makes a file, says its path, forks a child holding it (if asked: the child says its pid), then waits.
_OWNER = """
import os, sys, time
from litdata_io.internal import owned_file
fd, path = owned_file(sys.argv[1], sys.argv[2])
print(path, flush=True)
if sys.argv[3] == "fork" and os.fork() == 0:
    print(os.getpid(), flush=True)
    time.sleep(120)
    os._exit(0)
time.sleep(120)
"""


def _owner(tmp_path: Path, prefix: str, fork: bool = False) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _OWNER, prefix, str(tmp_path), "fork" if fork else "-"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(2 if fork else 1)]
    return proc, lines


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(30)
    if proc.stdout is not None:
        proc.stdout.close()


def test_a_killed_owners_file_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead, (dead_path,) = _owner(tmp_path, "litdata-test-")
    live, (live_path,) = _owner(tmp_path, "litdata-test-")
    try:
        _kill(dead)
        assert Path(dead_path).exists()  # SIGKILL: nobody removed it
        other = tmp_path / "litdata-other-1"
        other.write_bytes(b"")  # another kind of file: not ours to judge
        assert sweep_orphans("litdata-test-", str(tmp_path)) == 1
        assert not Path(dead_path).exists()
        assert Path(live_path).exists() and other.exists()
    finally:
        _kill(live)
    assert sweep_orphans("litdata-test-", str(tmp_path)) == 1
    assert not Path(live_path).exists()


def test_a_forked_child_keeps_the_file_alive_after_its_parent_dies(tmp_path: Path) -> None:
    parent, (path, child_pid) = _owner(tmp_path, "litdata-test-", fork=True)
    try:
        _kill(parent)
        assert sweep_orphans("litdata-test-", str(tmp_path)) == 0  # its child may still use it
        assert Path(path).exists()
    finally:
        os.kill(int(child_pid), signal.SIGKILL)
    for _ in range(200):  # the child is not ours to wait for: poll until its descriptors are closed
        if sweep_orphans("litdata-test-", str(tmp_path)):
            break
        threading.Event().wait(0.05)
    assert not Path(path).exists()


def test_a_new_process_sweeps_before_it_makes_its_own(tmp_path: Path) -> None:
    dead, (dead_path,) = _owner(tmp_path, "litdata-test-")
    _kill(dead)
    live, (live_path,) = _owner(tmp_path, "litdata-test-")  # its owned_file swept the first
    try:
        assert not Path(dead_path).exists()
        assert Path(live_path).exists()
    finally:
        _kill(live)


def test_the_owner_updates_its_record_under_a_lock_that_does_not_conflict(tmp_path: Path) -> None:
    fd, path = owned_file("litdata-test-", str(tmp_path))
    try:
        os.pwrite(fd, b"\0" * 8, 0)
        other = os.open(path, os.O_RDWR)
        done = threading.Event()

        def update() -> None:
            with record_lock(other, 8):
                os.pwrite(other, b"12345678", 0)
            done.set()

        threading.Thread(target=update, daemon=True).start()
        assert done.wait(10), "the record lock waited on the owner's lifetime lock"
        os.close(other)
        assert os.pread(fd, 8, 0) == b"12345678"
        assert sweep_orphans("litdata-test-", str(tmp_path)) == 0  # still ours
    finally:
        os.unlink(path)
        os.close(fd)


# Makes a loader's watchdog board, says its path, waits to be killed.
_BOARD = """
import time
from litdata_io.internal import ActivityBoard
board = ActivityBoard(2)
print(board.path, flush=True)
time.sleep(120)
"""


def _board() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", _BOARD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_the_watchdog_board_a_sigkilled_process_left_is_deleted_by_the_next_one() -> None:
    """Before, a loader's /dev/shm board stayed until reboot when its process was SIGKILLed."""
    first, first_path = _board()
    _kill(first)
    assert Path(first_path).exists()
    second, second_path = _board()
    try:
        assert not Path(first_path).exists()
        assert Path(second_path).exists()
    finally:
        _kill(second)
    sweep_orphans("litdata-activity-", str(Path(second_path).parent))
    assert not Path(second_path).exists()
