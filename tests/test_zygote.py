"""A script forked from the test zygote (tests/support/zygote.py) sees what ``python script.py`` would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.support.zygote import run_python, start_python

SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing, os, sys, threading

    def square(x):
        return x * x

    def late():
        with open(os.environ["ATEXIT_FILE"], "w") as handle:
            handle.write("ran")

    if __name__ == "__main__":
        import atexit
        atexit.register(late)
        with multiprocessing.get_context("spawn").Pool(2) as pool:  # a fresh interpreter re-runs this file
            squares = pool.map(square, range(4))
        print(json.dumps({
            "argv": sys.argv, "path": sys.path[:2], "cwd": os.getcwd(), "env": dict(os.environ),
            "squares": squares, "main": sys.modules["__main__"].__file__, "threads": threading.active_count(),
            "sid": os.getsid(0) == os.getpid(),
        }))
        print("to stderr", file=sys.stderr)
        sys.exit(int(sys.argv[1]))
    """
)


def test_a_forked_script_runs_as_a_fresh_interpreter_would(tmp_path: Path) -> None:
    script = tmp_path / "dir" / "script.py"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    work = tmp_path / "work"
    work.mkdir()
    # LANG set: with none, a fresh interpreter coerces the C locale (it adds LC_CTYPE); the zygote did that once
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "PYTHONPATH": str(tmp_path / "extra")}
    env["ATEXIT_FILE"] = str(tmp_path / "late")
    proc = start_python([str(script), "3"], env=env, cwd=work, start_new_session=True)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    seen = json.loads(stdout.splitlines()[-1])
    assert seen["argv"] == [str(script), "3"]
    assert seen["path"] == [str(script.parent), str(tmp_path / "extra")]  # the script's folder, then PYTHONPATH
    assert seen["cwd"] == str(work)
    assert seen["env"] == env  # nothing of the test process's environment
    assert seen["squares"] == [0, 1, 4, 9]
    assert seen["main"] == str(script)
    assert seen["threads"] == 1
    assert seen["sid"] is True
    assert stderr == "to stderr\n"
    assert (tmp_path / "late").read_text() == "ran"  # atexit ran, as at interpreter exit


def test_a_module_runs_as_python_dash_m_would(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    tool = "import sys\nprint(__name__, sys.argv[1:], sys.path[0])\nraise SystemExit('bad')\n"
    (package / "tool.py").write_text(tool)
    done = run_python(["-m", "pkg.tool", "a", "b"], env={}, cwd=tmp_path, timeout=60)
    assert done.stdout == f"__main__ ['a', 'b'] {tmp_path}\n"
    assert (done.returncode, done.stderr) == (1, "bad\n")  # SystemExit with a message, as python does


def test_a_killed_script_and_a_timeout(tmp_path: Path) -> None:
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(60)\n")
    proc = start_python([str(script)], env={}, cwd=tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.5)
    assert proc.poll() is None
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_python([str(script)], env={}, cwd=tmp_path, timeout=1)
    assert time.monotonic() - started < 30  # its session was killed, not waited for


def test_only_scripts_and_modules() -> None:
    with pytest.raises(ValueError, match="-c"):
        start_python(["-c", "pass"], env={}, cwd=Path.cwd())


STATE = textwrap.dedent(
    """
    import json, multiprocessing, sys
    import numpy
    print(json.dumps({
        "numpy": int(numpy.random.randint(1 << 30)), "authkey": multiprocessing.current_process().authkey.hex(),
        "dont_write_bytecode": sys.dont_write_bytecode, "hash_randomization": sys.flags.hash_randomization,
        "stderr_line_buffered": sys.stderr.line_buffering,
    }))
    """
)


def test_what_a_fresh_interpreter_has_of_its_own(tmp_path: Path) -> None:
    script = tmp_path / "state.py"
    script.write_text(STATE)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    seen = [json.loads(run_python([str(script)], env=env, cwd=tmp_path, timeout=60).stdout) for _ in range(2)]
    assert seen[0]["numpy"] != seen[1]["numpy"]  # numpy's global generator seeded per process
    assert seen[0]["authkey"] != seen[1]["authkey"]
    assert seen[0]["dont_write_bytecode"] is True and seen[0]["stderr_line_buffered"] is True
    # A start-up variable a fork cannot apply gets a fresh interpreter: the hash seed is the one asked for.
    fixed = run_python([str(script)], env={**env, "PYTHONHASHSEED": "0"}, cwd=tmp_path, timeout=60)
    assert json.loads(fixed.stdout)["hash_randomization"] == 0


def test_one_file_for_both_streams(tmp_path: Path) -> None:
    """``output``: stdout and stderr in one file, in the order written (as ``stderr=subprocess.STDOUT``)."""
    script = tmp_path / "both.py"
    script.write_text("import sys\nprint('out 1', flush=True)\nprint('err', file=sys.stderr)\nprint('out 2')\n")
    log = tmp_path / "log"
    proc = start_python([str(script)], env={}, cwd=tmp_path, output=log)
    assert proc.wait(timeout=60) == 0
    assert log.read_text() == "out 1\nerr\nout 2\n"
    assert proc.communicate() == ("out 1\nerr\nout 2\n", "")


def test_the_thread_count_torch_reads_at_import(tmp_path: Path) -> None:
    """torch took the zygote's ``OMP_NUM_THREADS`` at import; a child still gets the one it asks for."""
    script = tmp_path / "threads.py"
    script.write_text("import torch\nprint(torch.get_num_threads())\n")
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1"}
    done = run_python([str(script)], env=env, cwd=tmp_path, timeout=120)
    assert (done.returncode, done.stdout) == (0, "1\n"), done.stderr


def test_two_threads_wait_for_one_child(tmp_path: Path) -> None:
    script = tmp_path / "nap.py"
    script.write_text("import time\ntime.sleep(0.5)\n")
    proc = start_python([str(script)], env={}, cwd=tmp_path)
    codes: list[int] = []
    waiters = [threading.Thread(target=lambda: codes.append(proc.wait(timeout=20))) for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    assert codes == [0, 0]  # both saw the end, not only the first to be woken


def test_a_zygote_that_preloads_more(tmp_path: Path) -> None:
    """``preload``: a zygote of its own imported those modules too; the plain zygote did not."""
    script = tmp_path / "loaded.py"
    script.write_text("import sys\nprint('colorsys' in sys.modules, 'torch' in sys.modules)\n")
    preloaded = run_python([str(script)], env={}, cwd=tmp_path, timeout=120, preload=("colorsys",))
    plain = run_python([str(script)], env={}, cwd=tmp_path, timeout=60)
    assert (preloaded.returncode, preloaded.stdout, plain.stdout) == (0, "True True\n", "False True\n"), (
        preloaded.stderr
    )
