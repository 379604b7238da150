"""Upstream's import paths for the mixing datasets and the Cache hand out the one real object."""

from __future__ import annotations

import importlib

import pytest

import litdata

PATHS = {
    "litdata.streaming.cache": {"Cache": "litdata_stream", "Dir": "litdata_io"},
    "litdata.streaming.combined": {"CombinedStreamingDataset": "litdata_stream"},
    "litdata.streaming.parallel": {"ParallelStreamingDataset": "litdata_stream"},
    "litdata.streaming": {
        "Cache": "litdata_stream",
        "CombinedStreamingDataset": "litdata_stream",
        "ParallelStreamingDataset": "litdata_stream",
    },
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_shim_reexports_the_real_object(path: str) -> None:
    module = importlib.import_module(path)
    for name, owner in PATHS[path].items():
        assert getattr(module, name) is getattr(importlib.import_module(owner), name), f"{path}.{name}"
        assert name in module.__all__


def test_top_level_names() -> None:
    import litdata_stream

    for name in ("CombinedStreamingDataset", "ParallelStreamingDataset"):
        assert name in vars(litdata)["__all__"]
        assert getattr(litdata, name) is getattr(litdata_stream, name)
    from litdata.streaming.cache import Dir
    from litdata.streaming.resolver import Dir as ResolverDir

    assert Dir is ResolverDir
