"""Upstream's documented import paths work and hand out the one real object."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import litdata

PATHS = {
    "litdata.streaming.item_loader": {
        "TokensLoader": "litdata_format",
        "PyTreeLoader": "litdata_format",
        "ParquetLoader": "litdata_format",
    },
    "litdata.streaming.serializers": {"Serializer": "litdata_format", "JPEGSerializer": "litdata_format.serializers"},
    "litdata.streaming.writer": {"BinaryWriter": "litdata_format", "index_parquet_dataset": "litdata_stream"},
    "litdata.utilities.hf_dataset": {"index_hf_dataset": "litdata_stream"},
    "litdata.streaming.resolver": {"Dir": "litdata_io"},
    "litdata.streaming.dataset": {"StreamingDataset": "litdata_stream"},
    "litdata.streaming.dataloader": {
        "StreamingDataLoader": "litdata_stream",
        "LoaderStallWarning": "litdata_stream",
        "LoaderStats": "litdata_stream",
    },
    "litdata.streaming.collate": {"litdata_collate": "litdata_stream"},
    "litdata.utilities.encryption": {"FernetEncryption": "litdata_format", "RSAEncryption": "litdata_format"},
    "litdata.utilities.train_test_split": {"train_test_split": "litdata_stream"},
    "litdata.types": {"Image": "litdata_format", "Graph": "litdata_format"},
    "litdata.debugger": {"enable_tracer": "litdata_io"},
    "litdata.utilities.keys_index": {"build_keys_index": "litdata_prep"},
    "litdata.streaming.dataset_update": {"dataset_update": "litdata_prep", "DatasetUpdate": "litdata_prep"},
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_shim_reexports_the_real_object(path: str) -> None:
    module = importlib.import_module(path)
    for name, owner in PATHS[path].items():
        assert getattr(module, name) is getattr(importlib.import_module(owner), name), f"{path}.{name}"
        assert name in module.__all__


def test_every_top_level_name_resolves() -> None:
    for name in vars(litdata)["__all__"]:
        assert getattr(litdata, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        litdata.nope  # noqa: B018  # pyright: ignore[reportAttributeAccessIssue]


def test_import_litdata_is_cheap() -> None:
    code = "import sys, litdata; print('torch' in sys.modules); litdata.TokensLoader; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_state_of_a_pickled_object_is_loadable_through_the_upstream_path() -> None:
    import pickle

    from litdata.streaming.item_loader import TokensLoader

    loader = pickle.loads(pickle.dumps(TokensLoader(block_size=8)))
    assert isinstance(loader, TokensLoader) and loader.block_size == 8


def test_upstreams_namedtuple_registration_is_ours() -> None:
    import litdata_format
    from litdata.utilities._pytree import _register_namedtuple

    assert _register_namedtuple is litdata_format.register_namedtuple


def test_extras_extra_is_declared() -> None:
    """``pip install "litdata[extras]"`` (upstream's docs) names an extra the installed metadata declares."""
    from importlib.metadata import metadata

    assert "extras" in (metadata("litdata").get_all("Provides-Extra") or [])
