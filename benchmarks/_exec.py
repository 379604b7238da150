"""Run workloads in fresh processes (the library's own venv python) and read back their JSON lines."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._venvs import Baseline, peer_python

__all__ = ["RUNNERS", "Job", "python_for", "run_batch", "run_once", "use_baseline", "use_python"]

HERE = Path(__file__).resolve().parent
RUNNERS = {
    "ours": HERE / "runners" / "litdata_runner.py",
    "upstream": HERE / "runners" / "litdata_runner.py",
    "mosaic": HERE / "runners" / "mosaic_runner.py",
    "limits": HERE / "runners" / "limit_runner.py",
    "baseline": HERE / "runners" / "litdata_runner.py",  # this checkout's runner: the same harness as ours
}
# The library name each runner is told (the baseline is ours, at another commit).
_RUNNER_LIB = {"baseline": "ours"}
_baseline: Baseline | None = None
_pythons: dict[str, str] = {}  # a peer's python given on the command line (its venv is not built)


def use_baseline(baseline: Baseline) -> None:
    """Run the library ``baseline`` with ``baseline``'s venv from now on."""
    global _baseline
    _baseline = baseline


def use_python(lib: str, python: str) -> None:
    """Run the peer ``lib`` with ``python`` (an existing venv's) instead of the side venv run.py builds."""
    _pythons[lib] = python


RESULT_PREFIX = "BENCH_RESULT "

Job = tuple[str, str, dict[str, Any], Path]  # id, runner workload, params, scratch folder


def python_for(lib: str) -> str:
    """Ours and the limits run in this workspace's venv; the peers in theirs."""
    if lib in ("ours", "limits"):
        return sys.executable
    if lib == "baseline":
        if _baseline is None:
            raise RuntimeError("the baseline is not built: run.py --baseline REV builds it")
        return str(_baseline.python)
    return _pythons.get(lib) or str(peer_python(lib))


def _env(work: Path, nopyc: bool = False, torch_first: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LITDATA_", "BENCH_"))}
    if torch_first:
        env["BENCH_TORCH_FIRST"] = "1"  # the runner's first line imports torch
    env["LITDATA_CACHE_DIR"] = str(work / "litdata-cache")
    env["PYTHONUNBUFFERED"] = "1"
    if nopyc:
        # An empty folder of its own for the compiled bytecode: every module the run (and its
        # workers) imports is compiled from source, the standard library's too.
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def _spawn(
    command: list[str], work: Path, timeout: float, log: Path, nopyc: bool = False, torch_first: bool = False
) -> tuple[list[dict[str, Any]], str]:
    """Run ``command`` in ``work``; return its result lines and ``ok``, ``timeout`` or ``crash``."""
    work.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    status = "ok"
    with log.open("w") as sink:
        sink.write(f"$ {' '.join(command)}\n")
        sink.flush()
        proc = subprocess.Popen(
            command,
            cwd=work,
            env=_env(work, nopyc, torch_first),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            start_new_session=True,  # its own process group, so a stalled run is killed with its workers
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            status = "timeout"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the run's group (stray workers)
        sink.write(out or "")
        if status == "ok" and proc.returncode != 0:
            status = "crash"
    lines = [
        json.loads(line[len(RESULT_PREFIX) :]) for line in (out or "").splitlines() if line.startswith(RESULT_PREFIX)
    ]
    return lines, status


def _failed(status: str, timeout: float) -> dict[str, Any]:
    if status == "timeout":
        return {"ok": False, "status": "timeout", "error": f"no result after {timeout:.0f} s"}
    return {"ok": False, "status": "crash", "error": "the process ended without a result line"}


def run_once(
    lib: str,
    kind: str,
    params: dict[str, Any],
    *,
    work: Path,
    timeout: float,
    log: Path,
    nopyc: bool = False,
    torch_first: bool = False,
) -> dict[str, Any]:
    """Run ``kind`` for ``lib`` with ``params`` in its own process; ``work`` is removed afterwards.

    With ``nopyc`` the process finds no compiled bytecode (see ``Row.nopyc``); with ``torch_first``
    its first line imports torch (``Row.torch_first``).

    Returns the runner's result, or ``{"ok": False, "status": "timeout" | "crash", ...}``.
    """
    started = time.perf_counter()
    command = [python_for(lib), str(RUNNERS[lib]), _RUNNER_LIB.get(lib, lib), kind, json.dumps(params)]
    lines, status = _spawn(command, work, timeout, log, nopyc, torch_first)
    result = lines[-1] if lines else _failed(status, timeout)
    result["process_s"] = time.perf_counter() - started
    with log.open("a") as sink:
        sink.write(f"\n# result: {json.dumps(result)}\n")
    shutil.rmtree(work, ignore_errors=True)
    return result


def run_batch(lib: str, jobs: list[Job], *, folder: Path, timeout: float, log: Path) -> dict[str, dict[str, Any]]:
    """Run all ``jobs`` for ``lib`` in ONE process (``--quick``: fast, not a measurement)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / f"batch-{lib}.json"
    spec.write_text(json.dumps([{"id": job_id, "kind": kind, "params": params} for job_id, kind, params, _ in jobs]))
    command = [python_for(lib), str(RUNNERS[lib]), _RUNNER_LIB.get(lib, lib), "--batch", str(spec)]
    lines, status = _spawn(command, folder / f"batch-{lib}", timeout * max(1, len(jobs)), log)
    results = {line.pop("id"): line for line in lines}
    for job_id, _, _, work in jobs:
        results.setdefault(job_id, _failed(status, timeout))
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(folder / f"batch-{lib}", ignore_errors=True)
    return results
