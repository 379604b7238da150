"""What every runner shares: the command line, the clock, peak memory and the one JSON line out.

Runners execute in the peers' venvs too, so this module uses the standard library only. A runner
is called as ``python <runner>.py <lib> <workload> <params-json>`` and prints, as its last line,
``BENCH_RESULT {...}`` with at least ``items`` (samples, tokens or files done) and ``elapsed_s``.
``--quick`` calls ``python <runner>.py <lib> --batch <jobs-json-file>`` instead: every job in one
process (one result line each, with its ``id``), to stay fast; those numbers are no measurement.

Peak memory: ``RUSAGE_CHILDREN`` cannot be used, because ``import torch`` forks a helper whose
``ru_maxrss`` is the size of the parent at the fork. So a thread watches this process and its live
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
import sys
import threading
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
    """Samples on a thread every ``interval`` seconds and keeps peaks: process-tree RSS, and the
    size of a folder (the cache's peak bytes) when one is given."""

    def __init__(self, folder: str | None = None, interval: float = 0.05) -> None:
        self.folder = folder
        self.interval = interval
        self.peak_rss = 0
        self.peak_bytes = 0
        self._pid = os.getpid()
        self._rss_at_reading = 0  # the summed RSS when the PSS was last read
        self._read_at = -1.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def _sample(self, final: bool = False) -> None:
        rss = _tree_sum(self._pid, _rss)
        now = time.monotonic()
        grown = rss > self._rss_at_reading * 1.1 and now - self._read_at >= 0.5
        if final or grown:
            self.peak_rss = max(self.peak_rss, tree_rss(self._pid))
            self._rss_at_reading, self._read_at = max(self._rss_at_reading, rss), now
        if self.folder is not None:
            self.peak_bytes = max(self.peak_bytes, tree_bytes(self.folder))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(final=True)


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
