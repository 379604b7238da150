"""litracer: real tracer logs in, Chrome/Perfetto JSON out; torn and garbled lines skipped."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from litracer import __version__, convert_file, convert_lines, parse_line, write_trace

_VARS = ("LITDATA_LOG_FILE", "LITDATA_TRACE_LEVEL", "LITDATA_TRACE_CATEGORIES", "RANK", "WORLD_SIZE")

# Run in a fresh interpreter so the tracer's process-wide state stays out of this one.
_PRODUCER = """
import multiprocessing, sys, threading, time
from litdata_io import enable_tracer, trace_begin, trace_counter, trace_end, trace_instant, trace_span

enable_tracer("debug", log_file=sys.argv[1])

def child():
    with trace_span("download", chunk=1):
        time.sleep(0.002)

with trace_span("download", chunk=0, size=100):
    time.sleep(0.002)
trace_begin("read", chunk=0)
trace_instant("lock", op="increment", chunk=0)
time.sleep(0.001)
trace_end("read", chunk=0)
trace_begin("read", chunk=1)  # never ended: the process "dies" mid-read
trace_counter("cache", "delete", used_bytes=123)
try:
    with trace_span("delete", chunk=0):
        raise OSError("gone")
except OSError:
    pass
t = threading.Thread(target=lambda: trace_instant("download", note="from a thread"), name="Prefetcher")
t.start(); t.join()
p = multiprocessing.get_context("fork").Process(target=child)
p.start(); p.join()
"""


def _produce(log: Path) -> None:
    pytest.importorskip("litdata_io")
    env = {k: v for k, v in os.environ.items() if k not in _VARS}
    subprocess.run([sys.executable, "-c", _PRODUCER, str(log)], env=env, check=True)


def _cli() -> list[str]:
    script = shutil.which("litracer", path=str(Path(sys.executable).parent))
    assert script is not None, "the litracer console script is not installed next to this interpreter"
    return [script]


def _check_chrome(events: list[dict[str, Any]]) -> None:
    for event in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= event.keys(), event
        assert isinstance(event["ts"], (int, float))
        assert isinstance(event["pid"], int)
        assert isinstance(event["tid"], int)
        if event["ph"] == "X":
            assert event["dur"] >= 0
    phases = [e["ph"] for e in events]
    first_real = next(i for i, ph in enumerate(phases) if ph != "M")
    assert "M" not in phases[first_real:], "metadata comes first"
    stamps = [e["ts"] for e in events[first_real:]]
    assert stamps == sorted(stamps)


def test_convert_a_real_log(tmp_path: Path) -> None:
    log = tmp_path / "litdata_debug.log"
    _produce(log)
    conv = convert_file(log)
    events = conv.events
    _check_chrome(events)
    assert conv.skipped == 0

    real = [e for e in events if e["ph"] != "M"]
    downloads = [e for e in real if e["name"] == "download" and e["ph"] == "X"]
    assert [e["args"]["chunk"] for e in downloads] == [0, 1]
    assert downloads[0]["args"]["size"] == 100
    assert all(e["dur"] >= 2000 for e in downloads)  # slept 2 ms
    assert downloads[0]["pid"] != downloads[1]["pid"]  # the forked child

    # B/E of chunk 0 became one complete read; the read of chunk 1 was never ended.
    reads = [e for e in real if e["name"] == "read"]
    assert [(e["ph"], e["args"]["chunk"]) for e in reads] == [("X", 0), ("B", 1)]
    assert reads[0]["dur"] >= 1000
    assert conv.unmatched == 1

    (crash,) = [e for e in real if e["name"] == "crash"]
    assert (crash["ph"], crash["cat"], crash["args"]["span"], crash["args"]["error"]) == (
        "I",
        "crash",
        "delete",
        "OSError: gone",
    )
    assert conv.crashes == 1
    (counter,) = [e for e in real if e["ph"] == "C"]
    assert counter["args"] == {"used_bytes": 123}
    assert conv.durations["download"][0] == 2

    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "Prefetcher" in names.values()
    assert "MainThread" in names.values()
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert set(processes) == {e["pid"] for e in real}
    assert set(processes.values()) == {"rank 0 main"}


def test_cli_writes_json_that_loads(tmp_path: Path) -> None:
    log = tmp_path / "litdata_debug.log"
    _produce(log)
    out = subprocess.run([*_cli(), str(log), "--validate"], capture_output=True, text=True, check=True)
    assert "events from" in out.stderr
    assert "crashes 1" in out.stderr
    # The default output name, gzip Chrome JSON as upstream's docs show.
    trace = json.loads(gzip.decompress((tmp_path / "litdata_debug.json.gz").read_bytes()))
    _check_chrome(trace["traceEvents"])

    gz = tmp_path / "io.json.gz"
    subprocess.run([*_cli(), str(log), "-o", str(gz), "--cat", "download,read", "--quiet"], check=True)
    events = json.loads(gzip.decompress(gz.read_bytes()))["traceEvents"]
    assert {e["cat"] for e in events if e["ph"] != "M"} == {"download", "read"}


def test_module_entry_point_and_stdout(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    log.write_text("ts: 10; pid: 1; tid: 2; name: download; ph: X; cat: download; dur: 5; chunk: 3;\n")
    out = subprocess.run(
        [sys.executable, "-m", "litracer", str(log), "-o", "-"], capture_output=True, text=True, check=True
    )
    events = json.loads(out.stdout)["traceEvents"]
    (event,) = [e for e in events if e["ph"] == "X"]
    assert event == {
        "name": "download",
        "ph": "X",
        "ts": 10.0,
        "pid": 1,
        "tid": 2,
        "dur": 5.0,
        "cat": "download",
        "cname": "rail_load",
        "args": {"chunk": 3},
    }


def test_version() -> None:
    out = subprocess.run([*_cli(), "--version"], capture_output=True, text=True, check=False)
    assert (out.returncode, out.stdout.strip()) == (0, f"litracer {__version__}"), out.stderr
    assert __version__ == version("litracer")


def test_missing_log_is_a_clear_error(tmp_path: Path) -> None:
    out = subprocess.run([*_cli(), str(tmp_path / "nope.log")], capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert "no such file" in out.stderr


def test_garbled_and_torn_lines_are_skipped(tmp_path: Path) -> None:
    log = tmp_path / "litdata_debug.log"
    _produce(log)
    good = len(log.read_text().splitlines())
    with log.open("ab") as f:
        f.write(b"ts: 1; pid: 1; tid: 1; name: download; ph: X; cat: download; dur: 3; chunk: 1; worker\n")
        f.write(b"\xff\xfe not utf-8 at all;\n")
        f.write(b"ts: 1; pid: 1; this is not a pair; ph: I; name: x;\n")
        f.write(b"\n")
        f.write(b"\x00\x00\x00\x00\n")
        f.write(b"ts: 99999999999999999; pid: 7; tid: 7; name: download; ph: X; cat: download; dur: 3;")  # torn
    conv = convert_file(log)
    assert conv.skipped == 5
    assert conv.first_skipped == good + 1
    _check_chrome(conv.events)
    assert 7 not in {e["pid"] for e in conv.events}

    out = subprocess.run(
        [*_cli(), str(log), "-o", str(tmp_path / "t.json")], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert f"skipped 5 line(s) that are not whole events (first: line {good + 1})" in out.stderr
    json.loads((tmp_path / "t.json").read_text())


@pytest.mark.parametrize(
    "line",
    [
        "",
        "ts: 1; pid: 1; tid: 1; name: x; ph: Q;",  # unknown phase
        "ts: soon; pid: 1; tid: 1; name: x; ph: I;",
        "ts: 1; pid: one; tid: 1; name: x; ph: I;",
        "ts: 1; pid: 1; tid: 1; name: x; ph: X;",  # complete without a duration
        "ts: 1; pid: 1; tid: 1; name: x; ph: X; dur: -4;",
        "ts: 1; pid: 1; tid: 1; ph: I;",  # no name
        "ts: nan; pid: 1; tid: 1; name: x; ph: I;",
    ],
)
def test_invalid_lines(line: str) -> None:
    assert parse_line(line) is None


def test_upstream_style_line() -> None:
    # Upstream LitData writes "ts:...;PID:...; TID:...;" and packs its pairs without spaces.
    line = "ts:1712.500;PID:42; TID:43; name: download;ph: B;cat: download;cname: rail_load;chunk: 3;"
    assert parse_line(line) == {
        "name": "download",
        "ph": "B",
        "ts": 1712.5,
        "pid": 42,
        "tid": 43,
        "cat": "download",
        "cname": "rail_load",
        "args": {"chunk": 3},
    }


def test_no_complete_keeps_begin_end() -> None:
    lines = [
        "ts: 1; pid: 1; tid: 1; name: read; ph: B; cat: read; chunk: 0;\n",
        "ts: 4; pid: 1; tid: 1; name: read; ph: E; cat: read; chunk: 0;\n",
        "ts: 5; pid: 1; tid: 1; name: read; ph: E; cat: read; chunk: 9;\n",
    ]
    kept = convert_lines(lines, complete=False)
    assert [e["ph"] for e in kept.events if e["ph"] != "M"] == ["B", "E", "E"]
    assert kept.unmatched == 1
    paired = convert_lines(lines)
    assert [(e["ph"], e.get("dur")) for e in paired.events if e["ph"] != "M"] == [("X", 3.0), ("E", None)]
    assert paired.unmatched == 1


def test_worker_processes_are_named_and_ordered(tmp_path: Path) -> None:
    lines = [
        "ts: 3; pid: 30; tid: 30; name: sample; ph: I; cat: sample; dist_global_rank: 1; dist_world_size: 2; "
        "worker_rank: 0; worker_world_size: 2;\n",
        "ts: 2; pid: 20; tid: 21; name: batch; ph: I; cat: batch; dist_global_rank: 0; dist_world_size: 2;\n",
        "ts: 1; pid: 10; tid: 10; name: x; ph: I; cat: read;\n",
    ]
    conv = convert_lines(lines)
    meta = {(e["name"], e["pid"]): e["args"] for e in conv.events if e["ph"] == "M"}
    assert meta[("process_name", 30)] == {"name": "rank 1 worker 0"}
    assert meta[("process_name", 20)] == {"name": "rank 0 main"}
    assert meta[("process_name", 10)] == {"name": "process"}
    order = [meta[("process_sort_index", pid)]["sort_index"] for pid in (20, 30, 10)]
    assert order == sorted(order)
    assert meta[("thread_name", 20)] == {"name": "thread 21"}
    write_trace(conv.trace, tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text()) == conv.trace
