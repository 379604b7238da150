"""Fixtures shared by the root tests. Server fixtures live in their own modules (one function per
server) and are exposed here, so any test can ask for them by name.

The suite runs on two pytest-xdist workers by default (``-n 2 --dist loadfile`` in pyproject's
``addopts``): every test file runs whole on one worker, so module fixtures (the Ray cluster run,
shared datasets) are built once. The hook below hands the longest files out first, so that no
worker is left with one of them at the end while the other idles; the order of the tests inside a
file is unchanged.
"""

from __future__ import annotations

import pytest

from tests.cred_suite import aws_drive, aws_stack
from tests.servers import s3_bucket, s3_server

__all__ = ["aws_drive", "aws_stack", "s3_bucket", "s3_server"]

# The test files that take longest (CONTRIBUTING.md's table; `--durations=0` to measure again), longest
# first. A file missing here only loses its place in the queue, never a test.
LONGEST_FILES = (
    "tests/test_soak.py",
    "tests/test_credentials_profiles.py",
    "tests/test_credentials_containers.py",
    "tests/test_credentials.py",
    "tests/test_doc_examples_as_written.py",
    "tests/test_credentials_expiring.py",
    "tests/test_keyed_update.py",
    "tests/test_ray.py",
    "tests/test_compat_write_upstream_reads.py",
    "tests/test_credentials_google_azure.py",
    "tests/test_obstore_process.py",
    "tests/test_ddp.py",  # its ranks are forked from tests/zygote.py now
    "tests/test_benchmarks_smoke.py",
    "packages/litdata-stream/tests/test_resume_property.py",
    "tests/test_doc_examples_cloud.py",
    "tests/test_compat_keys.py",
    "packages/litdata-stream/tests/test_spawn.py",
    "tests/test_layering.py",
    "packages/litdata-stream/tests/test_epoch_property.py",
    "tests/test_loader_watchdog.py",
    "tests/test_stalled_download.py",
    "packages/litdata-stream/tests/test_rank_env.py",
    "tests/test_upstream_loader_compat.py",
    "tests/test_bounded_decompression.py",
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
