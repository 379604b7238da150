"""The instrumentation probe: one call per site, fanned out to the tracer, the activity board and listeners."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from litdata_io import enable_tracer
from litdata_io.internal import ActivityBoard, attach_activity, probe

_VARS = ("LITDATA_LOG_FILE", "LITDATA_TRACE_LEVEL", "LITDATA_TRACE_CATEGORIES")


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    for var in _VARS:
        os.environ.pop(var, None)
    enable_tracer("off")
    yield
    attach_activity(None)
    enable_tracer("off")
    for var in _VARS:
        os.environ.pop(var, None)


class _Heard:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, object]]] = []

    def event(self, name: str, phase: str, args: Mapping[str, object]) -> None:
        self.events.append((name, phase, dict(args)))


def _never() -> str:
    raise AssertionError("the activity text was built with no board attached")


def test_nothing_observes_by_default_and_nothing_is_built() -> None:
    assert probe.begin("read", "read", _never, chunk=1) is None
    probe.end(None)
    with probe.span("download", "download", _never, chunk="c.bin") as span:
        span.set(bytes=3)  # the no-op span takes arguments too
    probe.instant("batch", "batch", batch=1)


def test_one_call_reaches_the_tracer_the_board_and_listeners(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    enable_tracer("chunk", log_file=log)
    board = ActivityBoard(1)
    heard = _Heard()
    try:
        attach_activity(board.path, 0)
        probe.listen(heard)
        token = probe.begin("read", "read", lambda: "read chunk 7", chunk=7)
        assert [a.text for a in board.read()[0]] == ["read chunk 7"]
        probe.end(token)
        assert board.read()[0] == []
        with probe.span("download", "download", "download s3://b/c.bin", chunk="c.bin") as span:
            assert [a.text for a in board.read()[0]] == ["download s3://b/c.bin"]
            span.set(bytes=10)
        probe.instant("worker_batch", "batch", worker=0)
    finally:
        probe.unlisten(heard)
        board.close()
    assert [(name, phase) for name, phase, _ in heard.events] == [
        ("read", "B"), ("read", "E"), ("download", "X"), ("worker_batch", "I"),
    ]  # fmt: skip
    events = [_fields(line) for line in log.read_text().splitlines()]
    events = [e for e in events if e["ph"] != "M"]  # thread names
    # worker_batch is a batch-level event: the chunk level records it too.
    expected = [("read", "B"), ("read", "E"), ("download", "X"), ("worker_batch", "I")]
    assert [(e["name"], e["ph"]) for e in events] == expected
    assert events[0]["chunk"] == "7" and events[2]["bytes"] == "10"


def _fields(line: str) -> dict[str, str]:
    pairs = (part.partition(":") for part in line.rstrip(";").split(";"))
    return {key.strip(): value.strip() for key, _, value in pairs}


def test_a_listener_alone_turns_the_probe_on_and_off() -> None:
    heard = _Heard()
    probe.listen(heard)
    try:
        token = probe.begin("read", "read", _never, chunk=2)  # no board: the text is never built
        assert token is not None
        probe.end(token)
    finally:
        probe.unlisten(heard)
    assert probe.begin("read", "read", _never, chunk=3) is None
    assert [(n, p, a) for n, p, a in heard.events] == [("read", "B", {"chunk": 2}), ("read", "E", {"chunk": 2})]
