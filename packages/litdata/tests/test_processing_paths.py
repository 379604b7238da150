"""Upstream's ``litdata.processing`` paths, the top-level optimize/map/merge_datasets, and ``litdata quickstart``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import litdata
import litdata_prep

PATHS = {
    "litdata.processing": ["map", "merge_datasets", "optimize"],
    "litdata.processing.functions": ["map", "merge_datasets", "optimize", "walk"],
    "litdata.processing.data_processor": ["ALL_DONE"],
    "litdata.processing.readers": ["BaseReader", "ParquetReader"],
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_processing_shims_reexport_the_real_objects(path: str) -> None:
    module = importlib.import_module(path)
    assert sorted(module.__all__) == sorted(PATHS[path])
    for name in PATHS[path]:
        assert getattr(module, name) is getattr(litdata_prep, name)


def test_top_level_names() -> None:
    for name in ("optimize", "map", "merge_datasets", "walk"):
        assert name in vars(litdata)["__all__"]
        assert getattr(litdata, name) is getattr(litdata_prep, name)


@pytest.mark.slow
def test_quickstart_runs_the_main_job() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "litdata", "quickstart", "--samples", "256"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "repeated: 0, lost: 0 -> OK" in proc.stdout
    assert "256 samples streamed" in proc.stdout
    assert "item/s" in proc.stderr  # the optimize progress bar
