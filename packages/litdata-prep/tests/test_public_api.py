"""litdata_prep's modules declare their API (the package's own is pinned by tests/test_layering.py)."""

from __future__ import annotations

import importlib

import litdata_prep


def test_every_module_declares_all() -> None:
    for name in (
        "_checkpoint",
        "_checks",
        "_engine",
        "_indexes",
        "_job",
        "_key_index",
        "_map",
        "_merge",
        "_nodes",
        "_optimize",
        "_output",
        "_staging",
    ):
        module = importlib.import_module(f"litdata_prep.{name}")
        assert isinstance(module.__all__, list), name
        for exported in module.__all__:
            assert hasattr(module, exported), f"{name}.{exported}"
    for name in ("_inputs", "_publish", "_ray.executor", "_ray.data", "_readers", "_worker"):
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
