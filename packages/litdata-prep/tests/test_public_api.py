"""The public API of litdata_prep is exactly this; the meta package's upstream paths hand out the same objects."""

from __future__ import annotations

import importlib

import litdata_prep


def test_all_is_pinned() -> None:
    assert sorted(litdata_prep.__all__) == sorted(
        [
            "ALL_DONE",
            "BaseReader",
            "DatasetExistsError",
            "DatasetUpdate",
            "ParquetReader",
            "WorkerError",
            "__version__",
            "build_keys_index",
            "complete_dataset",
            "dataset_update",
            "map",
            "merge_datasets",
            "optimize",
            "walk",
        ]
    )
    for name in litdata_prep.__all__:
        assert getattr(litdata_prep, name) is not None


def test_every_module_declares_all() -> None:
    for name in ("_checkpoint", "_engine", "_indexes", "_job", "_map", "_merge", "_nodes", "_optimize", "_output"):
        module = importlib.import_module(f"litdata_prep.{name}")
        assert isinstance(module.__all__, list), name
        for exported in module.__all__:
            assert hasattr(module, exported), f"{name}.{exported}"
    for name in ("_plan", "_publish", "_readers", "_worker"):
        module = importlib.import_module(f"litdata_prep.{name}")
        for exported in module.__all__:
            assert hasattr(module, exported), f"{name}.{exported}"


def test_all_done_is_upstreams_sentinel() -> None:
    assert litdata_prep.ALL_DONE == "ALL_DONE"


def test_import_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, litdata_prep; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
