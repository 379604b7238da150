"""Every golden fixture that real upstream litdata 0.2.76 wrote reads back with the written values.

The layouts with their own test files (framed / per-sample zstd, Arrow rows, encryption, MDS)
are checked there; this file covers the classic pytree, tokens, whole-file zstd and media ones.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from litdata_format import DatasetReader, TokensLoader, load_index, register_namedtuple

FIXTURES = Path(__file__).parent / "fixtures"
UPSTREAM = FIXTURES / "upstream-0.2.76"


def _load_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("litdata_fixture_samples", FIXTURES / "samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_samples()
register_namedtuple(samples.Point, samples.POINT_SERIALIZED_TYPE_NAME)

CLASSIC = [
    "dict_basic",
    "tuple_sample",
    "nested",
    "nested_pytree",
    "nested_namedtuple",
    "numpy_arrays",
    "tensors",
    "strings_bytes",
    "bare_bytes",
    "zstd_classic",
    "json_leaves",
]


def _same(got: Any, expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected), f"{where}: keys {list(got)}"
        for key in expected:
            _same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), f"{where}: {got!r} != {expected!r}"
        for k, (a, b) in enumerate(zip(got, expected)):
            _same(a, b, f"{where}[{k}]")
    elif isinstance(expected, np.ndarray):
        value = got.numpy() if isinstance(got, torch.Tensor) else got
        assert isinstance(value, np.ndarray), f"{where}: {type(got)}"
        assert value.dtype == expected.dtype and value.shape == expected.shape, f"{where}: {value.dtype} {value.shape}"
        np.testing.assert_array_equal(value, expected)
    else:
        assert got == expected and type(got) is type(expected), f"{where}: {got!r} != {expected!r}"


@pytest.mark.parametrize("name", CLASSIC)
def test_classic_fixture(name: str) -> None:
    meta = samples.FIXTURES[name]
    make = getattr(samples, meta["generator"])
    reader = DatasetReader(UPSTREAM / name)
    if "expected_data_format" in meta:
        assert reader.index.data_format == meta["expected_data_format"]
    assert len(reader) == meta["num_samples"]
    for i in range(len(reader)):
        _same(reader[i], make(i), f"{name}[{i}]")


def test_tensor_leaves_come_back_as_tensors_of_the_stored_dtype() -> None:
    sample = DatasetReader(UPSTREAM / "tensors")[2]
    for key, dtype in samples.FIXTURES["tensors"]["torch_leaves"].items():
        assert isinstance(sample[key], torch.Tensor)
        assert str(sample[key].dtype) == dtype


@pytest.mark.parametrize("name", ["tokens", "tokens_numpy"])
def test_tokens_fixture(name: str) -> None:
    meta = samples.FIXTURES[name]
    block = meta["reader_block_size"]
    index = load_index(UPSTREAM / name)
    reader = DatasetReader(UPSTREAM / name, item_loader=TokensLoader(block_size=block))
    streams = [getattr(samples, meta["generator"])(i) for i in range(meta["num_samples"])]
    # Rebuild each chunk's token stream from the generator and cut it into blocks, as a reader must.
    expected, taken = [], 0
    for chunk in index.chunks:
        flat = np.concatenate(streams[taken : taken + chunk.chunk_size])
        taken += chunk.chunk_size
        assert len(flat) == chunk.dim
        expected.extend(flat[k * block : (k + 1) * block] for k in range(chunk.dim // block))
    assert len(reader) == len(expected)
    for i, block_tokens in enumerate(expected):
        got = reader[i]
        value = got.numpy() if isinstance(got, torch.Tensor) else got
        np.testing.assert_array_equal(value, block_tokens)
        assert value.dtype == block_tokens.dtype


def test_images_fixture() -> None:
    from PIL import Image

    reader = DatasetReader(UPSTREAM / "images")
    for i in range(len(reader)):
        sample = reader[i]
        assert sample["index"] == i
        assert isinstance(sample["pil"], Image.Image)
        np.testing.assert_array_equal(np.asarray(sample["pil"]), samples.rgb_array(i))
        # upstream re-encoded this JPEG (lossy): same shape, close pixels.
        jpeg = sample["jpeg"]
        assert isinstance(jpeg, torch.Tensor) and jpeg.dtype == torch.uint8 and tuple(jpeg.shape) == (3, 8, 8)
        diff = np.abs(jpeg.permute(1, 2, 0).numpy().astype(int) - samples.rgb_array(i).astype(int))
        assert diff.mean() < 40


def test_jpeg_file_fixture_decodes_the_stored_bytes() -> None:
    from PIL import Image

    reader = DatasetReader(UPSTREAM / "jpeg_file")
    for i in range(len(reader)):
        decoded = np.asarray(Image.open(io.BytesIO(samples.jpeg_file_sample_bytes(i))).convert("RGB"))
        got = reader[i]
        assert isinstance(got, torch.Tensor)
        np.testing.assert_array_equal(got.permute(1, 2, 0).numpy(), decoded)


def test_every_fixture_folder_is_covered() -> None:
    covered = set(CLASSIC) | {"tokens", "tokens_numpy", "images", "jpeg_file"}
    elsewhere = {name for name in samples.FIXTURES if samples.FIXTURES[name]["writer"] == "mds"}
    tested_in_other_files = {
        "zstd_framed",
        "zstd_framed_default",
        "zstd_sample_level",
        "quirk_tuple_zstd_unframed",
        "quirk_fernet_sample_arrow_plaintext",
        "json_rows",
        "json_rows_zstd",
        "fernet_sample",
        "fernet_chunk",
        "rsa_sample",
        "rsa_chunk",
    }
    assert set(samples.FIXTURES) == covered | elsewhere | tested_in_other_files
