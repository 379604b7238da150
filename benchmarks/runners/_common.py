"""What every runner shares: the command line, the clock, peak memory and the one JSON line out.

Runners execute in the peers' venvs too, so this module uses the standard library only. A runner
is called as ``python <runner>.py <lib> <workload> <params-json>`` and prints, as its last line,
``BENCH_RESULT {...}`` with at least ``items`` (samples, tokens or files done) and ``elapsed_s``.
``--quick`` calls ``python <runner>.py <lib> --batch <jobs-json-file>`` instead: every job in one
process (one result line each, with its ``id``), to stay fast; those numbers are no measurement.

Peak memory: ``RUSAGE_CHILDREN`` cannot be used, because ``import torch`` forks a helper whose
``ru_maxrss`` is the size of the parent at the fork. So a process watches this process and its live
descendants (``/proc/<pid>/task/*/children``) every 50 ms and keeps the peak of their summed
proportional set size (PSS, ``/proc/<pid>/smaps_rollup``). PSS, not RSS: forked DataLoader
workers and forked helpers share their parent's pages (torch's among them), and summing RSS
counts each shared page once per process, which says more about how a library starts its
processes than about the memory it uses. PSS splits each shared page between the processes that
map it, so the sum is the memory the run really holds. Where smaps_rollup is unreadable, RSS.

Reading smaps_rollup walks the process's page tables: ~23 ms for a process that imported torch
(whose CUDA libraries map gigabytes), under the lock that the process's own mmap/munmap wait
for. Read every 50 ms for every process of the tree, it took a third to all of a core and stalled
the measured runs (stream-s3-cold-w0 ran at 0.78x of its speed with the sampler below). So the
thread reads the cheap summed RSS (``statm``, ~40 us) every 50 ms, and the PSS only when that
sum has grown 10% past the largest sum seen at a PSS reading (at most every 0.5 s), and once at
the end: two to a few readings per run, and the PSS peak is missed by at most what the process
tree gains in 10% of its RSS or in half a second.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = [
    "RESULT_PREFIX",
    "Sampler",
    "Workload",
    "emit",
    "main",
    "peak_rss",
    "read_epochs",
    "run_job",
    "tree_bytes",
    "tree_rss",
]

RESULT_PREFIX = "BENCH_RESULT "

Workload = Callable[[str, dict[str, Any]], dict[str, Any]]


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(x) for x in handle.read().split())
        except OSError:
            continue
    return found


def _pss(pid: int) -> int:
    """Bytes of ``pid``'s memory: its PSS where the kernel gives it, else its RSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return _rss(pid)


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * _PAGE


def _tree_sum(pid: int, measure: Callable[[int], int]) -> int:
    total = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            total += measure(current)
        except (OSError, ValueError, IndexError):
            continue
        stack.extend(_children(current))
    return total


def tree_rss(pid: int) -> int:
    """Summed resident bytes (PSS, see the module's docstring) of ``pid`` and its live descendants."""
    return _tree_sum(pid, _pss)


class Sampler:
    """Samples every ``interval`` seconds and keeps peaks: process-tree RSS, and the size of a folder
    (the cache's peak bytes) when one is given.

    The sampling runs in a process of its own (a fresh interpreter running this module), not in a
    thread of the measured one: a thread there is what a user's script does not have, and it made
    ``optimize`` start its workers from a forkserver (it forks only when no other thread runs). The
    sampler leaves itself out of the tree it sums.
    """

    def __init__(self, folder: str | None = None, interval: float = 0.05) -> None:
        self.folder = folder
        self.interval = interval
        self.peak_rss = 0
        self.peak_bytes = 0
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Sampler:
        command = [sys.executable, "-S", os.path.abspath(__file__), str(os.getpid()), str(self.interval)]
        self._proc = subprocess.Popen(
            [*command, self.folder or ""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self._proc.stdout is not None
        self._proc.stdout.readline()  # it is sampling
        return self

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stdin is not None
        proc.stdin.close()  # the sampler's cue to take its last sample and report
        peaks = json.loads(proc.stdout.readline() or "[0, 0]")
        proc.wait()
        self.peak_rss, self.peak_bytes = peaks


def _sample_until_told(pid: int, interval: float, folder: str | None) -> None:
    """The sampler process: sum ``pid``'s tree every ``interval`` s until stdin closes, then print the peaks."""
    import select

    me = os.getpid()
    peak_rss = peak_bytes = rss_at_reading = 0
    read_at = -1.0

    def without_me(measure: Callable[[int], int]) -> Callable[[int], int]:
        return lambda current: 0 if current == me else measure(current)

    def sample(final: bool = False) -> None:
        nonlocal peak_rss, peak_bytes, rss_at_reading, read_at
        rss = _tree_sum(pid, without_me(_rss))
        now = time.monotonic()
        grown = rss > rss_at_reading * 1.1 and now - read_at >= 0.5
        if final or grown:
            peak_rss = max(peak_rss, _tree_sum(pid, without_me(_pss)))
            rss_at_reading, read_at = max(rss_at_reading, rss), now
        if folder:
            peak_bytes = max(peak_bytes, tree_bytes(folder))

    print("sampling", flush=True)
    while True:
        sample()
        ready, _, _ = select.select([sys.stdin], [], [], interval)
        if ready and not sys.stdin.read(1):
            break
    sample(final=True)
    print(json.dumps([peak_rss, peak_bytes]), flush=True)


def peak_rss(sampler: Sampler) -> dict[str, float]:
    """Peak resident memory in MiB: this process alone (ru_maxrss) and its process tree (sampled)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rss_self_mb": own, "rss_peak_mb": max(own, sampler.peak_rss / 2**20)}


def tree_bytes(path: str) -> int:
    """The bytes of the regular files under ``path`` (0 if it does not exist)."""
    total = 0
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue  # evicted or renamed while we looked
    return total


def read_epochs(loader: Any, params: dict[str, Any], started: float) -> dict[str, Any]:
    """Iterate ``params["epochs"]`` epochs of ``loader``, summing each batch's ``params["key"]``
    column; the result's ``complete`` says whether every sample came exactly once per epoch (the
    count and the sum are ``params["expected"]`` and ``params["expected_sum"]``)."""
    key = params["key"]
    work_s = params.get("work_s", 0.0)  # the training step's time per sample (a sleep)
    count, total, first = 0, 0, None
    for _ in range(params.get("epochs", 1)):
        for batch in loader:
            if first is None:
                first = time.perf_counter() - started
            values = batch[key]
            count += len(values)
            total += int(values.sum())
            if work_s:
                time.sleep(work_s * len(values))
    return {
        "items": count,
        "elapsed_s": time.perf_counter() - started,
        "first_batch_s": first,
        "complete": count == params["expected"] and total == params["expected_sum"],
    }


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def emit(result: dict[str, Any]) -> None:
    """Print the result line the orchestrator reads."""
    sys.stdout.flush()
    print(RESULT_PREFIX + json.dumps(result, sort_keys=True), flush=True)


def run_job(workloads: dict[str, Workload], lib: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run workload ``name`` for ``lib``; failures become a result with ``ok`` False."""
    if name not in workloads:
        return {"ok": False, "status": "n/a", "error": f"{name} has no equivalent in {lib}"}
    started = time.perf_counter()
    cpu_before = _cpu_s()
    try:
        with Sampler(params.get("cache_dir")) as sampler:
            result = workloads[name](lib, params)
    except Exception as exc:  # report it as a failed run; the orchestrator keeps going
        traceback.print_exc()
        return {"ok": False, "status": "error", "error": f"{type(exc).__name__}: {exc}"[:500]}
    result.setdefault("ok", True)
    result.setdefault("status", "ok")
    result["wall_s"] = time.perf_counter() - started
    result["cpu_s"] = _cpu_s() - cpu_before  # the run's and its joined workers' CPU seconds
    if params.get("cache_dir"):
        result["cache_peak_bytes"] = sampler.peak_bytes
    result.update(peak_rss(sampler))
    return result


def main(workloads: dict[str, Workload]) -> None:
    """Run ``argv[2]`` from ``workloads`` for library ``argv[1]`` (or ``--batch`` jobs) and emit results."""
    lib, name, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    if name != "--batch":
        emit(run_job(workloads, lib, name, json.loads(arg)))
        return
    with open(arg) as handle:
        jobs: list[dict[str, Any]] = json.load(handle)
    for job in jobs:
        result = run_job(workloads, lib, job["kind"], job["params"])
        result["id"] = job["id"]
        emit(result)
        gc.collect()  # drop the last job's datasets (Mosaic keeps shared memory per live dataset)


if __name__ == "__main__":
    _sample_until_told(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] or None)
