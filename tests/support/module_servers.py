"""Servers of one test file: started with its first test that asks, stopped after its last.

For the docs' examples (``tests/test_doc_examples_as_written.py``, ``tests/test_docs_code_blocks.py``),
which must start from servers no other file has written to. A test file binds the ones it uses
(``s3 = module_servers.s3``), so pytest finds them there and scopes them to that file. The session's
shared servers are ``s3_server`` (``tests/support/servers.py``) and ``azurite``, ``fake_gcs``,
``hf_hub`` (``tests/support/servers_extra.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import S3Server, start_moto
from tests.support.servers_extra import (
    AzuriteServer,
    FakeGcsServer,
    HfHubServer,
    start_azurite,
    start_fake_gcs,
    start_hf_hub,
)

__all__ = ["azure", "gcs", "hf", "s3"]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """A moto server for this file: every example starts from an empty server (moto's reset)."""
    with start_moto() as server:
        yield server


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HfHubServer]:
    """A Hub stand-in for this file, serving the repositories of a new temp folder."""
    with start_hf_hub(tmp_path_factory.mktemp("hub")) as server:
        yield server


@pytest.fixture(scope="module")
def gcs() -> Iterator[FakeGcsServer]:
    """A GCS emulator for this file."""
    with start_fake_gcs() as server:
        yield server


@pytest.fixture(scope="module")
def azure() -> Iterator[AzuriteServer]:
    """An Azurite blob service for this file."""
    with start_azurite() as server:
        yield server
