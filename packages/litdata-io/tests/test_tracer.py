"""The tracer: levels and categories, environment overrides, many writers, spans and crashes."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from litdata_io import (
    enable_tracer,
    trace_begin,
    trace_counter,
    trace_crash,
    trace_enabled,
    trace_end,
    trace_instant,
    trace_span,
    tracer_config,
)
from litdata_io._instrument._tracer import TRACE_CATEGORIES, TRACE_LEVELS, traced

_VARS = ("LITDATA_LOG_FILE", "LITDATA_TRACE_LEVEL", "LITDATA_TRACE_CATEGORIES")


@pytest.fixture(autouse=True)
def _tracer_off() -> Iterator[None]:
    """Each test starts and ends with tracing off and none of the tracer's variables set.

    No monkeypatch here: a test's own ``monkeypatch.setenv`` is undone before this teardown runs
    (this fixture is set up first), so the values it would restore do not outlive the test.
    """
    for var in _VARS:
        os.environ.pop(var, None)
    enable_tracer("off")
    yield
    for var in _VARS:
        os.environ.pop(var, None)
    enable_tracer("off")
    for var in _VARS:
        os.environ.pop(var, None)


def _parse(line: str) -> dict[str, str]:
    assert line.endswith(";"), line
    fields: dict[str, str] = {}
    for pair in line[:-1].split(";"):
        key, sep, value = pair.partition(":")
        assert sep, f"not a key: value pair: {pair!r} in {line!r}"
        fields[key.strip()] = value.strip()
    return fields


def _events(log: Path) -> list[dict[str, str]]:
    """The log's events (metadata lines left out); fails on a line that is not whole."""
    raw = log.read_bytes()
    assert raw.endswith(b"\n")
    events = [_parse(line) for line in raw.decode().splitlines()]
    return [e for e in events if e["ph"] != "M"]


def _emit_every_category() -> None:
    for cat in TRACE_CATEGORIES:
        with trace_span(cat, cat, chunk=1):
            pass


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _VARS}
    env.update(extra)
    return env


# --------------------------------------------------------------------------- levels, categories, off


@pytest.mark.parametrize("level", TRACE_LEVELS[1:])
def test_level_records_its_categories_and_the_quieter_ones(tmp_path: Path, level: str) -> None:
    log = tmp_path / "trace.log"
    config = enable_tracer(level, log_file=log)
    _emit_every_category()
    rank = TRACE_LEVELS.index(level)
    expected = {cat for cat, lvl in TRACE_CATEGORIES.items() if TRACE_LEVELS.index(lvl) <= rank}
    assert config.categories == expected
    assert {e["cat"] for e in _events(log)} == expected
    assert "download" in expected or level == "batch"
    assert ("sample" in expected) == (level in ("sample", "debug"))


def test_categories_replace_the_level(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    config = enable_tracer("batch", categories=["Download", " read "], log_file=log)
    assert config.categories == {"download", "read", "crash"}
    _emit_every_category()
    assert {e["cat"] for e in _events(log)} == {"download", "read", "crash"}


def test_custom_category(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer(categories=["prefetch"], log_file=log)
    trace_instant("queue", "prefetch", depth=3)
    trace_instant("download")  # not asked for
    (event,) = _events(log)
    assert (event["name"], event["cat"], event["ph"], event["depth"]) == ("queue", "prefetch", "I", "3")


def test_upstream_flags_drop_categories(tmp_path: Path) -> None:
    config = enable_tracer("sample", log_file=tmp_path / "t.log", item_loader=False, iterating_dataset=False)
    assert "sample" not in config.categories
    assert "epoch" not in config.categories
    assert "download" in config.categories


def test_off_writes_nothing_and_creates_no_file(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    config = enable_tracer("off", log_file=log)
    assert not config.enabled
    _emit_every_category()
    trace_instant("download")
    trace_begin("read")
    trace_end("read")
    trace_counter("cache", "delete", bytes=1)
    trace_crash(RuntimeError("x"))
    assert not any(trace_enabled(cat) for cat in TRACE_CATEGORIES)
    assert not log.exists()
    assert os.environ["LITDATA_TRACE_LEVEL"] == "off"


def test_off_span_is_one_shared_object() -> None:
    # Nothing is allocated per call when tracing is off.
    assert trace_span("download", chunk=1) is trace_span("read", chunk=2)


def test_unknown_level_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'loud' is not a tracer level"):
        enable_tracer("loud", log_file=tmp_path / "t.log")


def test_fresh_process_is_off_and_creates_no_file(tmp_path: Path) -> None:
    code = (
        "from litdata_io import trace_span, tracer_config\n"
        "with trace_span('download', chunk=1): pass\n"
        "print(tracer_config().level)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "off"
    assert list(tmp_path.iterdir()) == []


def test_import_does_not_import_torch() -> None:
    code = "import sys, litdata_io._instrument._tracer; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], env=_clean_env(), check=True)


# --------------------------------------------------------------------------- environment


def test_enable_tracer_exports_its_settings(tmp_path: Path) -> None:
    log = tmp_path / "sub" / ".." / "trace.log"
    config = enable_tracer("chunk", log_file=log)
    assert config.log_file == str(tmp_path / "trace.log")
    assert os.environ["LITDATA_LOG_FILE"] == config.log_file
    assert os.environ["LITDATA_TRACE_LEVEL"] == "chunk"
    assert set(os.environ["LITDATA_TRACE_CATEGORIES"].split(",")) == config.categories
    assert tracer_config() == config


def test_env_level_overrides_the_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_TRACE_LEVEL", "batch")
    config = enable_tracer("sample", log_file=tmp_path / "t.log")
    assert config.level == "batch"
    assert trace_enabled("batch")
    assert not trace_enabled("download")
    # Still the user's choice on a second call, although enable_tracer has rewritten the variable.
    assert enable_tracer("debug", log_file=tmp_path / "t.log").level == "batch"


def test_env_categories_and_file_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other.log"
    monkeypatch.setenv("LITDATA_TRACE_CATEGORIES", "read, sample")
    monkeypatch.setenv("LITDATA_LOG_FILE", str(other))
    config = enable_tracer("chunk", categories=["download"], log_file=tmp_path / "mine.log")
    assert config.categories == {"read", "sample", "crash"}
    assert config.log_file == str(other)
    _emit_every_category()
    assert not (tmp_path / "mine.log").exists()
    assert {e["cat"] for e in _events(other)} == {"read", "sample", "crash"}


def test_env_alone_turns_tracing_on_at_import(tmp_path: Path) -> None:
    log = tmp_path / "env.log"
    code = "from litdata_io import trace_span\nwith trace_span('download', chunk=7): pass\n"
    env = _clean_env(LITDATA_TRACE_LEVEL="chunk", LITDATA_LOG_FILE=str(log))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    (event,) = _events(log)
    assert (event["name"], event["chunk"]) == ("download", "7")


def test_bad_env_level_warns_and_stays_off(tmp_path: Path) -> None:
    code = "import litdata_io\nprint(litdata_io.tracer_config().level)\n"
    env = _clean_env(LITDATA_TRACE_LEVEL="loud", LITDATA_LOG_FILE=str(tmp_path / "x.log"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "off"
    assert "tracer stays off" in out.stderr


# --------------------------------------------------------------------------- events


def test_span_records_duration_and_args(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)
    before = time.time_ns() / 1000
    with trace_span("download", "download", chunk=3, url="s3://b/k;x\ny") as span:
        time.sleep(0.05)
        span.set(size=1024)
    after = time.time_ns() / 1000
    (event,) = _events(log)
    assert event["ph"] == "X"
    assert (event["name"], event["cat"]) == ("download", "download")
    assert before <= float(event["ts"]) <= after
    assert 50_000 <= float(event["dur"]) <= after - before
    assert (event["chunk"], event["size"]) == ("3", "1024")
    assert event["url"] == "s3://b/k,x y"  # ';' and newlines never break a line
    assert int(event["pid"]) == os.getpid()
    assert int(event["tid"]) == threading.get_native_id()
    assert (event["dist_global_rank"], event["dist_world_size"]) == ("0", "1")


def test_crash_in_span(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)
    with pytest.raises(ValueError, match="boom"), trace_span("download", chunk=5):
        raise ValueError("boom")
    span, crash = _events(log)
    assert (span["name"], span["ph"], span["error"], span["chunk"]) == ("download", "X", "ValueError", "5")
    assert (crash["name"], crash["ph"], crash["cat"]) == ("crash", "I", "crash")
    assert (crash["span"], crash["chunk"], crash["exception"]) == ("download", "5", "ValueError")
    assert crash["error"] == "ValueError: boom"


def test_crash_recorded_with_categories_that_omit_it(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer(categories=["read"], log_file=log)
    trace_crash(OSError("disk gone"), thread="prefetch")
    (crash,) = _events(log)
    assert (crash["name"], crash["exception"], crash["thread"]) == ("crash", "OSError", "prefetch")


def test_closing_a_generator_is_not_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)

    def items() -> Generator[int, None, None]:
        with trace_span("read", chunk=0):
            yield 1
            yield 2

    gen = items()
    next(gen)
    gen.close()
    (event,) = _events(log)
    assert event["name"] == "read"
    assert "error" not in event


def test_begin_end_instant_counter(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer("debug", log_file=log)
    trace_begin("read", chunk=2)
    trace_instant("lock", op="increment", chunk=2)
    trace_end("read", chunk=2)
    trace_counter("cache_bytes", "delete", used=10, cap=20)
    events = _events(log)
    assert [(e["name"], e["ph"]) for e in events] == [("read", "B"), ("lock", "I"), ("read", "E"), ("cache_bytes", "C")]
    assert "dist_global_rank" not in events[3]  # a counter's args are its series
    assert (events[3]["used"], events[3]["cap"]) == ("10", "20")
    stamps = [float(e["ts"]) for e in events]
    assert stamps == sorted(stamps)


def test_args_never_shadow_fixed_keys(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)
    trace_instant("read", name="x", ts=1, ph="B")
    (event,) = _events(log)
    assert (event["name"], event["ph"]) == ("read", "I")
    assert (event["arg_name"], event["arg_ts"], event["arg_ph"]) == ("x", "1", "B")


def test_traced_checks_per_call(tmp_path: Path) -> None:
    @traced("delete", chunk=9)
    def remove(x: int) -> int:
        return x * 2

    log = tmp_path / "trace.log"
    assert remove(1) == 2  # off: nothing
    enable_tracer("chunk", log_file=log)
    assert remove(2) == 4
    assert remove.__name__ == "remove"
    (event,) = _events(log)
    assert (event["name"], event["ph"], event["chunk"]) == ("delete", "X", "9")


def test_thread_names_are_recorded_once(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)

    def work() -> None:
        trace_instant("download", n=1)
        trace_instant("download", n=2)

    thread = threading.Thread(target=work, name="Prefetcher-0")
    thread.start()
    thread.join()
    meta = [_parse(line) for line in log.read_text().splitlines() if "ph: M;" in line]
    assert [m["thread_name"] for m in meta] == ["Prefetcher-0"]
    assert len(_events(log)) == 2


def test_rank_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)
    trace_instant("download")
    (event,) = _events(log)
    assert (event["dist_global_rank"], event["dist_world_size"]) == ("3", "4")


def test_switching_log_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    enable_tracer("chunk", log_file=first)
    trace_instant("download", n=1)
    enable_tracer("chunk", log_file=second)
    trace_instant("download", n=2)
    assert [e["n"] for e in _events(first)] == ["1"]
    assert [e["n"] for e in _events(second)] == ["2"]


# --------------------------------------------------------------------------- many processes

_CHILD = """
import threading
from litdata_io import trace_span, tracer_config

assert tracer_config().enabled, "the child did not pick the settings up"
pad = "x" * 3000  # lines longer than PIPE_BUF still arrive whole

def work(t):
    for i in range(150):
        with trace_span("download", "download", chunk=i, thread=t, pad=pad):
            pass

threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_processes_append_whole_lines(tmp_path: Path, start_method: str) -> None:
    log = tmp_path / "trace.log"
    enable_tracer("chunk", log_file=log)
    trace_instant("read", who="parent")
    ctx = multiprocessing.get_context("fork") if start_method == "fork" else multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=exec, args=(_CHILD, {})) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]

    events = _events(log)  # every line parses: nothing interleaved, nothing torn
    downloads = [e for e in events if e["name"] == "download"]
    assert len(downloads) == 4 * 3 * 150
    assert all(e["pad"] == "x" * 3000 for e in downloads)
    assert {int(e["pid"]) for e in downloads} == {p.pid for p in procs}
    per_thread = {(e["pid"], e["thread"]) for e in downloads}
    assert len(per_thread) == 12
    assert len({(e["pid"], e["tid"]) for e in downloads}) == 12
    meta = [line for line in log.read_text().splitlines() if "ph: M;" in line]
    assert len(meta) == 1 + 12  # the parent's main thread, then each child thread once


def test_dataloader_workers_carry_their_worker_rank(tmp_path: Path) -> None:
    torch_data = pytest.importorskip("torch.utils.data")

    class Items(torch_data.Dataset):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int) -> int:
            if trace_enabled("sample"):
                with trace_span("sample", index=index):
                    pass
            return index

    log = tmp_path / "trace.log"
    enable_tracer("sample", log_file=log)
    loader = torch_data.DataLoader(Items(), batch_size=2, num_workers=2, multiprocessing_context="fork")
    assert sorted(int(i) for batch in loader for i in batch) == list(range(8))
    samples = [e for e in _events(log) if e["name"] == "sample"]
    assert sorted(int(e["index"]) for e in samples) == list(range(8))
    assert {(e["worker_rank"], e["worker_world_size"]) for e in samples} == {("0", "2"), ("1", "2")}
