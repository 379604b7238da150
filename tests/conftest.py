"""The root tests: end-to-end tests across packages, against real servers and real processes.

Where a new test goes. A test of one package's behaviour, with nothing but that package and its
lower siblings, goes in ``packages/<dist>/tests/`` next to the code. A test that crosses packages
(optimize -> stream -> resume), talks to a server (S3, Azurite, GCS, the Hub stand-in), starts
several processes (DDP, Lightning, Ray) or compares with upstream LitData goes here, as a flat
``tests/test_<topic>.py``. What such tests share lives in ``tests/support/`` (servers, proxies,
sandboxes, harnesses, the zygotes, the upstream side venv, the functions workers import); a program
a test starts as a process of its own (a DDP rank, a driver, a Lightning fit) lives in
``tests/scripts/``, named for what it runs and started as ``python -m tests.scripts.<name>`` or by
its path. Data files go in ``tests/fixtures/``. A new backend of :class:`litdata_io.Storage` runs
the conformance suite of :mod:`litdata_io.testing` (``tests/test_storage_s3.py`` shows how).

Server fixtures live in their support modules (one function per server) and are exposed here, so
any test can ask for them by name.

The suite runs on two pytest-xdist workers by default (``-n 2 --dist loadfile`` in pyproject's
``addopts``): every test file runs whole on one worker, so module fixtures (the Ray cluster run,
shared datasets) are built once. The hook below hands the longest files out first, so that no
worker is left with one of them at the end while the other idles; the order of the tests inside a
file is unchanged.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support.cred_suite import aws_drive, aws_stack
from tests.support.servers import s3_bucket, s3_server

__all__ = ["aws_drive", "aws_stack", "s3_bucket", "s3_server"]


def _keep_compiled_bytecode() -> None:
    """Let this process and every interpreter the suite starts write and reuse compiled bytecode.

    With ``PYTHONDONTWRITEBYTECODE=1`` in the environment (some shells and images set it) nothing
    is ever cached: each of the suite's hundreds of fresh interpreters compiles torch's and
    litdata's modules again (0.3-0.5 CPU-s per torch import), and each pytest worker rewrites the
    asserts of every test module at collection. The suite drops the variable for itself and its
    children, so bytecode lands in ``__pycache__`` folders as Python does by default (ignored by
    git). ``LITDATA_TEST_PYCACHE=0`` leaves the environment as it is.
    """
    if os.environ.get("LITDATA_TEST_PYCACHE") == "0":
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


def _one_blas_thread() -> None:
    """Give the suite's interpreters one OpenBLAS thread, unless ``OPENBLAS_NUM_THREADS`` is set already.

    numpy's OpenBLAS starts a thread per core at ``import numpy`` (torch imports numpy), and each
    spins for a while waiting for work that never comes: ~0.07 CPU-s per interpreter, ~20 of the
    suite's ~750 busy CPU-seconds over its few hundred interpreters (``perf record -a``,
    CONTRIBUTING's ninth round). No test does BLAS work whose speed or thread count it checks.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_configure() -> None:
    """Set the suite's environment before any test module is imported, and before xdist starts its workers."""
    _keep_compiled_bytecode()
    _one_blas_thread()


# The test files that take longest (`--durations=0` to measure again), longest
# first. A file missing here only loses its place in the queue, never a test.
LONGEST_FILES = (
    # test-seconds of a quiet 2-core run of the whole suite (2026-12-06, 06:38 UTC: 2032 passed in 477 s)
    "tests/test_docs_code_blocks.py",  # new (issue 47): 230-240 s alone at load ~20, not yet measured quiet
    # 88: the PyG examples forked from a torch-geometric zygote; since the sixth round example 25's 10 s
    # of sleeps run in the background (87-98 in the seventh round's runs)
    "tests/test_doc_examples_as_written.py",
    "tests/test_ray.py",  # 89: one Ray cluster run, its module fixture (62-73 since the seventh round)
    "tests/test_stream_full_disk.py",  # ~100 at load: two ranks of two workers on a small disk (issue 53)
    "tests/test_prep_concurrent_output.py",  # ~120 at load: takeover races, 4 a case (2026-12-07)
    "tests/test_soak.py",  # 61
    "tests/test_credentials_containers.py",  # 42
    "tests/test_credentials_profiles.py",  # 41
    # 78 before the sixth round; since, its stream drivers run in the background: 28-34 s at load 5-8
    "tests/test_credentials_expiring.py",
    "tests/test_compat_keys.py",  # 26
    "tests/test_ddp.py",  # 25: its ranks are forked from tests/support/zygote.py
    # 111 at load 17 (2026-12-07): four Lightning fits, two of them DDP whose rank 1 Lightning
    # starts as a fresh interpreter (torch and lightning imported there)
    "tests/test_lightning.py",
    "packages/litdata-stream/tests/test_combined.py",  # 19
    "tests/test_stalled_download.py",  # 19
    "tests/test_ddp_spawn_placement.py",  # 19
    "tests/test_credentials.py",  # 19
    "tests/test_prep_checkpoint_kill.py",  # 18
    "tests/test_prep_streaming_inputs.py",  # 17
    "tests/test_chunk_integrity.py",  # 12
    "tests/test_loader_watchdog.py",  # 12
    "tests/test_benchmarks_smoke.py",  # 12
    "tests/test_obstore_process.py",  # 11
    "tests/test_credentials_google_azure.py",  # 11
    "tests/test_docs_site.py",  # new (issue 47): ~20 s at load ~20
    "tests/test_packaging.py",  # new (issue 47): ~12 s at load ~20
    "packages/litdata-stream/tests/test_spawn.py",  # 11
    "tests/test_doc_examples_cloud.py",  # 10
    "packages/litdata-stream/tests/test_loader_stats.py",  # 10
    "tests/test_compat_write_upstream_reads.py",  # 10
    "tests/test_raw_s3.py",  # 9
    "packages/litdata-raw/tests/test_scale.py",  # 9
    "tests/test_imagenet_scripts.py",  # 9
    "packages/litdata-stream/tests/test_epochs.py",  # 8
    "packages/litdata-stream/tests/test_parallel.py",  # 8
    "packages/litdata-prep/tests/test_optimize.py",  # 8
    "packages/litdata-io/tests/test_cache_stall.py",  # 8
    "tests/test_stream_s3_versions.py",  # 8
    "tests/test_prep_compat.py",  # 8
    "tests/test_storage_gcs.py",  # 7
    "packages/litdata-stream/tests/test_batched_reads.py",  # 7
)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture scope
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FILES)}
    root = config.rootpath

    def key(item: pytest.Item) -> int:
        try:
            relative = item.path.relative_to(root).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(relative, len(rank))

    items.sort(key=key)  # stable: the other files, and the tests inside each file, keep their order


def _cpu_seconds() -> tuple[float, float]:
    """(user, system) CPU-seconds of this process and of its children that have been waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + children.ru_utime, own.ru_stime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With ``LITDATA_TEST_CPU_LOG=<file>``, append each test's CPU-seconds to that file.

    Its own and its waited-for subprocesses' (a server or zygote started by a fixture is counted
    when the test that ends it reaps it). One line per test, ``user system nodeid``; each worker
    appends whole lines. ``python tests/scripts/cpu_report.py <file>`` sums them per file.
    """
    log = os.environ.get("LITDATA_TEST_CPU_LOG")
    if not log:
        yield
        return
    user, system = _cpu_seconds()
    yield
    after = _cpu_seconds()
    line = f"{after[0] - user:.3f} {after[1] - system:.3f} {item.nodeid}\n"
    with open(log, "a") as handle:  # O_APPEND: a line this short lands whole
        handle.write(line)


_SESSION_START = time.monotonic()


def host_speed() -> tuple[float, float, float]:
    """CPU-milliseconds of a 10-million-integer sum in this interpreter: (fastest, median, slowest) of five."""
    times = []
    for _ in range(5):
        start = time.process_time()
        sum(range(10_000_000))
        times.append((time.process_time() - start) * 1000)
    times.sort()
    return times[0], times[2], times[4]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a run of more than a minute, say how fast this host's CPU was, so suite times can be compared.

    The same 2-core machine has run the same work 30-40% slower at some hours than at others: the
    suite's time follows the CPU it gets, so a time says little without this.
    """
    if time.monotonic() - _SESSION_START < 60:
        return
    fastest, median, slowest = host_speed()
    terminalreporter.write_line(
        f"host speed: a 10-million-integer sum took {median:.0f} CPU-ms (five runs: {fastest:.0f}-{slowest:.0f}); "
        "compare suite times only at a similar speed"
    )
