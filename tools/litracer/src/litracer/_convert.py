"""Parse litdata's tracer log and build a Chrome/Perfetto ``{"traceEvents": [...]}`` trace.

A log line is ``key: value;`` pairs (``ts``, ``pid``, ``tid``, ``name``, ``ph``, ``cat``, ``dur``;
every other key is an event argument). Keys are read case-insensitively, so logs written by
upstream LitData (``ts:...;PID:...; TID:...;``) convert too. A line that does not parse is skipped
and counted, never fatal: a worker killed mid-write leaves a torn last line, and a log appended to
by many processes is still worth opening when one line is bad.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Conversion", "convert_file", "convert_lines", "parse_line", "write_trace"]

# Chrome trace event phases litdata writes or a hand-edited log may hold.
_PHASES = frozenset("BEXIiMCbenstfPONDR")
_FIXED = frozenset({"ts", "pid", "tid", "name", "ph", "cat", "dur", "cname", "s", "id"})
_CONTEXT = frozenset({"dist_global_rank", "dist_world_size", "dist_num_nodes", "worker_rank", "worker_world_size"})
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
# Colours from Chrome's reserved palette, so chrome://tracing tells the categories apart at a glance.
_CNAME = {
    "download": "rail_load",
    "read": "good",
    "delete": "rail_animate",
    "decompress": "cq_build_attempt_running",
    "batch": "thread_state_runnable",
    "epoch": "memory_dump",
    "sample": "generic_work",
    "lock": "thread_state_sleeping",
    "crash": "terrible",
}


def _number(text: str) -> float | None:
    if not _FLOAT.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _arg(text: str) -> Any:
    if _INT.fullmatch(text):
        return int(text)
    value = _number(text)
    return text if value is None else value


def parse_line(line: str) -> dict[str, Any] | None:
    """One log line as a Chrome trace event, or None when the line is not a whole, valid event.

    Args:
        line: one line of the tracer's log.
    """
    text = line.strip()
    if not text.endswith(";") or "\x00" in text:
        return None
    fields: dict[str, str] = {}
    for pair in text[:-1].split(";"):
        if not pair.strip():
            continue
        key, sep, value = pair.partition(":")
        key = key.strip().lower()
        if not sep or not key or " " in key:
            return None
        fields[key] = value.strip()

    ph, name = fields.get("ph", ""), fields.get("name", "")
    ts = _number(fields.get("ts", ""))
    pid = fields.get("pid", "")
    tid = fields.get("tid", pid)
    if ph not in _PHASES or not name or ts is None or not _INT.fullmatch(pid) or not _INT.fullmatch(tid):
        return None
    event: dict[str, Any] = {"name": name, "ph": ph, "ts": ts, "pid": int(pid), "tid": int(tid)}
    if "dur" in fields:
        dur = _number(fields["dur"])
        if dur is None or dur < 0:
            return None
        event["dur"] = dur
    elif ph == "X":
        return None
    for key in ("cat", "cname", "s", "id"):
        if fields.get(key):
            event[key] = fields[key]
    args = {k: _arg(v) for k, v in fields.items() if k not in _FIXED}
    if ph == "C":
        # Every arg of a counter is plotted as a series; rank/worker ids are not series.
        args = {k: v for k, v in args.items() if isinstance(v, (int, float)) and k not in _CONTEXT}
    if ph == "M":
        # The tracer writes ``thread_name: X`` / ``process_name: X``; Chrome wants ``args.name``.
        event.pop("cat", None)
        label = args.pop(name, None)
        args = {"name": str(label)} if label is not None else args
    if args:
        event["args"] = args
    return event


@dataclass
class Conversion:
    """A converted trace and what happened on the way.

    Attributes:
        trace: The Chrome JSON object (``{"traceEvents": [...], ...}``).
        lines: Lines read from the log.
        skipped: Lines that were not a whole, valid event (torn, garbled, not UTF-8).
        first_skipped: 1-based number of the first skipped line, if any.
        unmatched: ``B``/``E`` events left without a partner.
        crashes: ``crash`` events.
        durations: Per category, the number of complete events and their summed duration (us).
    """

    trace: dict[str, Any]
    lines: int = 0
    skipped: int = 0
    first_skipped: int | None = None
    unmatched: int = 0
    crashes: int = 0
    durations: dict[str, tuple[int, float]] = field(default_factory=dict[str, tuple[int, float]])

    @property
    def events(self) -> list[dict[str, Any]]:
        """The trace's events (metadata first, then by timestamp)."""
        return self.trace["traceEvents"]

    def summary(self) -> str:
        """One line: events, processes, time per category, unmatched B/E, crashes, skipped lines."""
        pids = {e["pid"] for e in self.events if e["ph"] != "M"}
        cats = ", ".join(f"{cat} {n}x {total / 1e6:.3f}s" for cat, (n, total) in sorted(self.durations.items()))
        skipped = f"; {self.skipped} line(s) skipped" if self.skipped else ""
        return (
            f"{sum(e['ph'] != 'M' for e in self.events)} events from {self.lines} lines, {len(pids)} process(es)"
            f"; {cats or 'no spans'}; unmatched B/E {self.unmatched}; crashes {self.crashes}{skipped}"
        )


def _read_lines(path: Path) -> Iterator[str | None]:
    """The log's lines; None for a line that is not UTF-8 or is the unterminated tail of the file."""
    with path.open("rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                # The last write of a killed process may have been cut short: never trust it.
                yield None
                continue
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                yield None


def _pair_spans(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Turn each matched B/E pair (same process, thread and name) into one complete event."""
    open_spans: dict[tuple[int, int, str], list[dict[str, Any]]] = defaultdict(list)
    out: list[dict[str, Any]] = []
    unmatched = 0
    for event in events:
        ph = event["ph"]
        key = (event["pid"], event["tid"], event["name"])
        if ph == "B":
            open_spans[key].append(event)
            out.append(event)
        elif ph == "E":
            stack = open_spans.get(key)
            if not stack:
                unmatched += 1
                out.append(event)
                continue
            begin = stack.pop()
            begin["ph"] = "X"
            begin["dur"] = max(0.0, event["ts"] - begin["ts"])
            if event.get("args"):
                begin["args"] = {**begin.get("args", {}), **event["args"]}
        else:
            out.append(event)
    unmatched += sum(len(stack) for stack in open_spans.values())
    return out, unmatched


def _process_label(args: dict[str, Any]) -> tuple[str, int] | None:
    rank = args.get("dist_global_rank")
    worker = args.get("worker_rank")
    if rank is None and worker is None:
        return None
    rank_i = rank if isinstance(rank, int) else 0
    if isinstance(worker, int):
        return f"rank {rank_i} worker {worker}", rank_i * 10_000 + worker + 1
    return f"rank {rank_i} main", rank_i * 10_000


def _metadata(events: list[dict[str, Any]], given: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """process_name/thread_name (and sort order) for every process and thread that lacks them."""
    named_pids = {e["pid"] for e in given if e["name"] == "process_name"}
    named_tids = {(e["pid"], e["tid"]) for e in given if e["name"] == "thread_name"}
    labels: dict[int, tuple[str, int] | None] = {}
    threads: set[tuple[int, int]] = set()
    for e in events:
        label = _process_label(e.get("args", {}))
        if label is not None or e["pid"] not in labels:
            labels[e["pid"]] = label
        threads.add((e["pid"], e["tid"]))
    meta: list[dict[str, Any]] = []
    for pid, label in sorted(labels.items()):
        name, order = label if label is not None else ("process", 10_000_000)
        if pid not in named_pids:
            meta.append({"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": pid, "args": {"name": name}})
        meta.append(
            {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": pid, "tid": pid, "args": {"sort_index": order}}
        )
    for pid, tid in sorted(threads - named_tids):
        name = "main thread" if tid == pid else f"thread {tid}"
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": name}})
    return meta


def convert_lines(
    lines: Iterable[str | None], *, complete: bool = True, categories: Iterable[str] | None = None
) -> Conversion:
    """Convert log lines (None stands for an unreadable line) into a trace.

    Args:
        lines: The log's lines.
        complete: Pair ``B``/``E`` events into complete (``X``) events.
        categories: Keep only events of these categories (metadata is always kept).
    """
    keep = frozenset(c.strip().lower() for c in categories) if categories is not None else None
    conv = Conversion(trace={})
    given_meta: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        conv.lines += 1
        event = parse_line(line) if line is not None else None
        if event is None:
            if line is not None and not line.strip():
                continue  # a blank line is not garbage
            conv.skipped += 1
            conv.first_skipped = conv.first_skipped or number
            continue
        if event["ph"] == "M":
            given_meta.append(event)
        elif keep is None or event.get("cat", "") in keep:
            events.append(event)

    events.sort(key=lambda e: e["ts"])  # stable: each thread's own order is kept for equal stamps
    if complete:
        events, conv.unmatched = _pair_spans(events)
        events.sort(key=lambda e: e["ts"])
    else:
        balance: Counter[tuple[int, int, str]] = Counter()
        for e in events:
            if e["ph"] in "BE":
                balance[(e["pid"], e["tid"], e["name"])] += 1 if e["ph"] == "B" else -1
        conv.unmatched = sum(abs(v) for v in balance.values())

    for e in events:
        cat = e.get("cat", "")
        if cat in _CNAME and "cname" not in e:
            e["cname"] = _CNAME[cat]
        if e["name"] == "crash":
            conv.crashes += 1
        if e["ph"] == "X":
            n, total = conv.durations.get(cat or e["name"], (0, 0.0))
            conv.durations[cat or e["name"]] = (n + 1, total + e["dur"])
    # Keep only the newest name a thread reported, then add names for everything unnamed.
    latest = {(e["pid"], e["tid"], e["name"]): e for e in given_meta}
    given = list(latest.values())
    pids = {e["pid"] for e in events}
    given = [e for e in given if e["pid"] in pids]
    meta = given + _metadata(events, given)
    conv.trace = {"traceEvents": meta + events, "displayTimeUnit": "ms"}
    return conv


def convert_file(path: str | Path, *, complete: bool = True, categories: Iterable[str] | None = None) -> Conversion:
    """Convert the log at ``path``; see :func:`convert_lines`.

    Args:
        path: the tracer's log file.
        complete: Pair ``B``/``E`` events into complete (``X``) events.
        categories: Keep only events of these categories (metadata is always kept).
    """
    return convert_lines(_read_lines(Path(path)), complete=complete, categories=categories)


def write_trace(trace: dict[str, Any], out: str | Path) -> None:
    """Write ``trace`` as JSON to ``out`` (gzip when it ends in ``.gz``; ``-`` is stdout).

    Args:
        trace: the Chrome trace (``{"traceEvents": [...], ...}``).
        out: the file to write, or ``-`` for stdout.
    """
    if str(out) == "-":
        json.dump(trace, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
        return
    path = Path(out)
    data = json.dumps(trace, separators=(",", ":")).encode()
    if path.suffix == ".gz":
        data = gzip.compress(data)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
