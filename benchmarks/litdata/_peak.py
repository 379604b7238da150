"""Peak memory of a process tree (this process and every process it started, DataLoader workers too).

Stdlib only, Linux ``/proc``: a thread sums the resident memory (``VmRSS``) of the tree every
``interval`` seconds and keeps the largest sum seen. Shared pages (a mapped chunk read by several
workers) count once per process, as ``top`` shows them: an upper bound.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The parent pid is the 2nd field after the parenthesised command name (which may hold spaces).
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def tree_rss(root: int | None = None) -> int:
    """The summed resident bytes of ``root`` (default: this process) and its descendants."""
    tree = _children()
    todo, total = [root or os.getpid()], 0
    while todo:
        pid = todo.pop()
        total += _rss(pid)
        todo.extend(tree.get(pid, []))
    return total


class PeakMemory:
    """``with PeakMemory() as peak: ...`` then ``peak.bytes``: the largest summed RSS of the tree seen."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.bytes = max(self.bytes, tree_rss())
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.bytes = max(self.bytes, tree_rss())
