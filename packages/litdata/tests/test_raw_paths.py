"""Upstream's ``litdata.raw`` import paths hand out litdata_raw's objects."""

from __future__ import annotations

import importlib

import pytest

import litdata
import litdata_raw

PATHS = {
    "litdata.raw": ["FileMetadata", "StreamingRawDataset"],
    "litdata.raw.indexer": ["BaseIndexer", "FileIndexer", "FileMetadata"],
    "litdata.raw.dataset": ["StreamingRawDataset"],
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_raw_shims(path: str) -> None:
    module = importlib.import_module(path)
    assert sorted(module.__all__) == sorted(PATHS[path])
    for name in PATHS[path]:
        assert getattr(module, name) is getattr(litdata_raw, name)


def test_top_level_export() -> None:
    assert "StreamingRawDataset" in vars(litdata)["__all__"]
    assert litdata.StreamingRawDataset is litdata_raw.StreamingRawDataset
