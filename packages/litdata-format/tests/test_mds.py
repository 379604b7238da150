"""Reading MosaicML MDS datasets as they are, against fixtures written by mosaicml-streaming 0.13.0.

The golden folders under ``fixtures/mds-0.13.0`` were written by the real ``MDSWriter``; the
values it was given come from ``fixtures/samples.py``. Every MDS column encoding is covered.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import importlib.util
import io
import json
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import zstandard
from PIL import Image, JpegImagePlugin, PngImagePlugin

from litdata_format import DatasetReader, TokensLoader, load_index, parse_index
from litdata_format._samples._pytree import TreeSpec

FIXTURES = Path(__file__).parent / "fixtures"
MDS = FIXTURES / "mds-0.13.0"


def _load_samples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("litdata_fixture_samples", FIXTURES / "samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


samples = _load_samples()


def _pixels(image: Any) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def _jpeg_roundtrip(image: Any, **options: Any) -> np.ndarray:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", **options)
    return _pixels(Image.open(io.BytesIO(buffer.getvalue())))


def _assert_jpeg(value: Any, reference: np.ndarray) -> None:
    # MDS hands back the file lazily opened by Pillow; pixels match a local encode of the same picture.
    assert type(value) is JpegImagePlugin.JpegImageFile and value.format == "JPEG"
    assert np.abs(_pixels(value) - reference).max() <= 2


def _assert_scalar(value: Any, dtype: type, expected: Any) -> None:
    assert type(value) is dtype
    assert value == dtype(expected)


# -- the golden datasets ------------------------------------------------------------------


def test_all_columns_index_maps_every_shard() -> None:
    raw = json.loads((MDS / "mds_all_columns" / "index.json").read_text())
    index = load_index(MDS / "mds_all_columns")
    assert index.config["format"] == "mds"
    assert index.item_loader == "PyTreeLoader"
    names = sorted(samples.MDS_ALL_COLUMNS)
    assert index.config["column_names"] == names
    assert index.data_format == [samples.MDS_ALL_COLUMNS[n] for n in names]
    expected_spec = [
        1,
        {
            "type": "builtins.dict",
            "context": json.dumps(names),
            "children_spec": [{"type": None, "context": None, "children_spec": []} for _ in names],
        },
    ]
    assert json.loads(index.config["data_spec"]) == expected_spec
    assert TreeSpec.from_json(index.config["data_spec"]).num_leaves == len(names)
    assert index.compression is None and index.encryption is None
    assert len(index.chunks) == len(raw["shards"])
    for chunk, shard in zip(index.chunks, raw["shards"]):
        assert chunk.filename == shard["raw_data"]["basename"]
        assert chunk.chunk_bytes == shard["raw_data"]["bytes"]
        assert chunk.chunk_size == shard["samples"]
        assert chunk.dim is None
        assert chunk.extra["column_sizes"] == shard["column_sizes"]
    assert index.num_items == samples.FIXTURES["mds_all_columns"]["num_samples"]


def test_all_columns_values() -> None:
    reader = DatasetReader(MDS / "mds_all_columns")
    count = samples.FIXTURES["mds_all_columns"]["num_samples"]
    assert len(reader) == count
    for i in range(count):
        got = reader[i]
        want = samples.mds_all_columns_sample(i)
        assert list(got) == sorted(want)

        assert type(got["c_bytes"]) is bytes and got["c_bytes"] == want["c_bytes"]
        assert type(got["c_str"]) is str and got["c_str"] == want["c_str"]
        assert type(got["c_int"]) is int and got["c_int"] == want["c_int"]
        for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
            _assert_scalar(got[f"c_{name}"], getattr(np, name), want[f"c_{name}"])
        for name in ("float16", "float32", "float64"):
            _assert_scalar(got[f"c_{name}"], getattr(np, name), want[f"c_{name}"])
        assert type(got["c_str_int"]) is int and got["c_str_int"] == want["c_str_int"]
        assert type(got["c_str_float"]) is float and got["c_str_float"] == want["c_str_float"]
        assert type(got["c_str_decimal"]) is Decimal and str(got["c_str_decimal"]) == str(want["c_str_decimal"])
        assert got["c_pkl"] == want["c_pkl"] and type(got["c_pkl"]["s"]) is set
        assert got["c_json"] == want["c_json"]

        # pil: raw pixels, exact.
        assert type(got["c_pil"]) is Image.Image and got["c_pil"].mode == "RGB"
        assert got["c_pil"].tobytes() == samples.rgb_array(i).tobytes()
        # png: lossless file.
        assert type(got["c_png"]) is PngImagePlugin.PngImageFile
        np.testing.assert_array_equal(_pixels(got["c_png"]), samples.rgb_array(i + 2))
        # jpeg: MDS re-encoded the PIL image with Pillow's defaults.
        _assert_jpeg(got["c_jpeg"], _jpeg_roundtrip(want["c_jpeg"]))
        # jpeg_array: the JPEG files were stored verbatim.
        assert isinstance(got["c_jpeg_array"], list) and len(got["c_jpeg_array"]) == 2
        for k, image in enumerate(got["c_jpeg_array"]):
            stored = image.fp.getvalue()
            if stored != want["c_jpeg_array"][k]:  # this Pillow encodes differently from the generator's
                manifest = json.loads((FIXTURES / "MANIFEST.json").read_text())
                assert hashlib.sha256(stored).hexdigest() == manifest["source_jpeg_sha256"][str(i + k)]
            _assert_jpeg(image, _pixels(Image.open(io.BytesIO(stored))))
        # list[pil] / list[jpeg] / list[png]
        assert [type(x) for x in got["c_list_pil"]] == [Image.Image, Image.Image]
        for image, source in zip(got["c_list_pil"], want["c_list_pil"]):
            assert image.size == source.size and image.tobytes() == source.tobytes()
        assert len(got["c_list_jpeg"]) == 1
        _assert_jpeg(got["c_list_jpeg"][0], _jpeg_roundtrip(want["c_list_jpeg"][0]))
        assert [type(x) for x in got["c_list_png"]] == [PngImagePlugin.PngImageFile] * 2
        for image, source in zip(got["c_list_png"], want["c_list_png"]):
            np.testing.assert_array_equal(_pixels(image), _pixels(source))
        # ndarray, ndarray:dtype, ndarray:dtype:shape
        for name in ("c_nd", "c_nd_int16", "c_nd_f32_3x2", "c_nd_u8_wide"):
            array, expected = got[name], want[name]
            assert type(array) is np.ndarray and array.dtype == expected.dtype and array.shape == expected.shape
            np.testing.assert_array_equal(array, expected)
            assert array.flags.writeable
    reader.close()


def test_zstd_shards() -> None:
    index = load_index(MDS / "mds_zstd")
    assert index.compression == "zstd"
    raw = json.loads((MDS / "mds_zstd" / "index.json").read_text())
    for chunk, shard in zip(index.chunks, raw["shards"]):
        assert chunk.filename == shard["zip_data"]["basename"] and chunk.filename.endswith(".mds.zstd")
        assert chunk.chunk_bytes == shard["raw_data"]["bytes"]
        assert chunk.extra["raw_filename"] == shard["raw_data"]["basename"]
    assert len(index.chunks) > 1
    reader = DatasetReader(MDS / "mds_zstd")
    assert len(reader) == samples.FIXTURES["mds_zstd"]["num_samples"]
    for i in range(len(reader)):
        got, want = reader[i], samples.mds_simple_sample(i)
        assert list(got) == sorted(want)
        assert got["id"] == want["id"] and type(got["id"]) is int
        assert got["text"] == want["text"] and got["raw"] == want["raw"]
        assert got["img"].tobytes() == want["img"].tobytes() and got["img"].size == (4, 4)


def _recompress(tmp_path: Path, compression: str, compress: Any) -> Path:
    """A copy of the uncompressed golden dataset with every shard compressed as MDS would store it."""
    out = tmp_path / compression.replace(":", "_")
    out.mkdir()
    extension = compression.partition(":")[0]
    index = json.loads((MDS / "mds_all_columns" / "index.json").read_text())
    for shard in index["shards"]:
        name = shard["raw_data"]["basename"]
        data = compress((MDS / "mds_all_columns" / name).read_bytes())
        (out / f"{name}.{extension}").write_bytes(data)
        shard["compression"] = compression
        shard["zip_data"] = {"basename": f"{name}.{extension}", "bytes": len(data), "hashes": {}}
    (out / "index.json").write_text(json.dumps(index))
    return out


@pytest.mark.parametrize(
    ("compression", "compress"),
    [
        ("gz", gzip.compress),
        ("gz:1", lambda d: gzip.compress(d, 1)),
        ("bz2", bz2.compress),
        ("zstd:19", lambda d: zstandard.ZstdCompressor(level=19).compress(d)),
    ],
)
def test_other_compressions(tmp_path: Path, compression: str, compress: Any) -> None:
    plain = DatasetReader(MDS / "mds_all_columns")
    packed = DatasetReader(_recompress(tmp_path, compression, compress))
    assert len(packed) == len(plain)
    for i in range(len(plain)):
        a, b = plain[i], packed[i]
        assert a["c_str"] == b["c_str"] and a["c_pkl"] == b["c_pkl"]
        np.testing.assert_array_equal(a["c_nd_u8_wide"], b["c_nd_u8_wide"])


def test_decompressed_copy_next_to_index(tmp_path: Path) -> None:
    # MDS's own cache keeps the decompressed shard and may drop the compressed one.
    copy = tmp_path / "mds"
    shutil.copytree(MDS / "mds_zstd", copy)
    for chunk in load_index(copy).chunks:
        packed = copy / chunk.filename
        (copy / chunk.extra["raw_filename"]).write_bytes(zstandard.ZstdDecompressor().decompress(packed.read_bytes()))
        packed.unlink()
    reader = DatasetReader(copy)
    assert [reader[i]["id"] for i in range(len(reader))] == [samples.mds_simple_sample(i)["id"] for i in range(6)]


def test_merged_index_with_subdirectories(tmp_path: Path) -> None:
    # streaming's merge_index prefixes each basename with its sub-dataset's folder.
    (tmp_path / "part0").mkdir()
    index = json.loads((MDS / "mds_all_columns" / "index.json").read_text())
    for shard in index["shards"]:
        name = shard["raw_data"]["basename"]
        shutil.copy(MDS / "mds_all_columns" / name, tmp_path / "part0" / name)
        shard["raw_data"]["basename"] = f"part0/{name}"
    (tmp_path / "index.json").write_text(json.dumps(index))
    reader = DatasetReader(tmp_path)
    assert reader[3]["c_int"] == samples.mds_all_columns_sample(3)["c_int"]


def test_reading_the_index_imports_neither_torch_nor_pillow() -> None:
    code = (
        "import sys; from litdata_format import DatasetReader; "
        f"r = DatasetReader({str(MDS / 'mds_all_columns')!r}); r[0]['c_str']; "
        "assert 'torch' not in sys.modules; print('PIL' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"  # decoding image columns needs Pillow, imported only then
    code = (
        "import sys; from litdata_format import load_index; "
        f"load_index({str(MDS / 'mds_all_columns')!r}); "
        "assert 'torch' not in sys.modules and 'PIL' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- bad input ------------------------------------------------------------------------------


def _edited(tmp_path: Path, edit: Any, source: str = "mds_all_columns") -> Path:
    copy = tmp_path / "mds"
    shutil.copytree(MDS / source, copy)
    index = json.loads((copy / "index.json").read_text())
    edit(index)
    (copy / "index.json").write_text(json.dumps(index))
    return copy


def test_missing_shard_file(tmp_path: Path) -> None:
    copy = tmp_path / "mds"
    shutil.copytree(MDS / "mds_all_columns", copy)
    last = load_index(copy).chunks[-1].filename
    (copy / last).unlink()
    reader = DatasetReader(copy)
    reader[0]
    with pytest.raises(FileNotFoundError, match=f"{last} listed in"):
        reader[len(reader) - 1]


@pytest.mark.parametrize("name", ["../shard.00000.mds", "..", "/etc/passwd", "a\\b.mds", "", "part//x.mds"])
def test_shard_name_escaping_the_dataset(tmp_path: Path, name: str) -> None:
    def edit(index: dict) -> None:
        index["shards"][0]["raw_data"]["basename"] = name

    with pytest.raises(ValueError, match="filename|basename"):
        load_index(_edited(tmp_path, edit))


def test_compressed_shard_name_with_dotdot(tmp_path: Path) -> None:
    def edit(index: dict) -> None:
        index["shards"][-1]["zip_data"]["basename"] = "../../shard.00001.mds.zstd"

    with pytest.raises(ValueError, match=r"'\.\.'"):
        load_index(_edited(tmp_path, edit, "mds_zstd"))


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda ix: ix["shards"][0].update(format="json"), "only MosaicML MDS shards"),
        (lambda ix: ix["shards"][0].update(version=3), "version 3"),
        (lambda ix: ix["shards"][-1]["column_encodings"].__setitem__(0, "str"), "share their columns"),
        (lambda ix: ix["shards"][0]["column_encodings"].__setitem__(0, "bfloat16"), "'bfloat16' is not supported"),
        (lambda ix: ix["shards"][0]["column_encodings"].__setitem__(15, "ndarray:complex64"), "complex64"),
        (lambda ix: ix["shards"][0]["column_sizes"].__setitem__(1, 4), "column_sizes says 4"),
        (lambda ix: ix["shards"][0].update(samples=-1), "'samples'"),
        (lambda ix: ix["shards"][0].update(compression="lz4"), "'lz4' is unknown"),
        (lambda ix: ix.update(shards={}), "'shards' list"),
    ],
)
def test_bad_index(tmp_path: Path, edit: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_index(_edited(tmp_path, edit))


def test_parse_index_dispatches_mds() -> None:
    obj = json.loads((MDS / "mds_zstd" / "index.json").read_text())
    assert parse_index(obj, "somewhere").config["format"] == "mds"


def test_truncated_shard(tmp_path: Path) -> None:
    copy = tmp_path / "mds"
    shutil.copytree(MDS / "mds_all_columns", copy)
    shard = copy / "shard.00000.mds"
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(ValueError, match="truncated"):
        DatasetReader(copy)[0]


def test_corrupt_compressed_shard(tmp_path: Path) -> None:
    copy = tmp_path / "mds"
    shutil.copytree(MDS / "mds_zstd", copy)
    (copy / load_index(copy).chunks[-1].filename).write_bytes(b"not zstd at all")
    reader = DatasetReader(copy)
    with pytest.raises(ValueError, match="zstd decompression failed"):
        reader[len(reader) - 1]


def test_corrupt_sample_names_the_column(tmp_path: Path) -> None:
    copy = tmp_path / "mds"
    shutil.copytree(MDS / "mds_all_columns", copy)
    shard = copy / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    start = int(np.frombuffer(bytes(data[4:8]), dtype="<u4")[0])
    data[start : start + 4] = (10**6).to_bytes(4, "little")  # c_bytes claims a million bytes
    shard.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="column 'c_bytes'"):
        DatasetReader(copy)[0]


def test_tokens_loader_refuses_mds() -> None:
    with pytest.raises(ValueError, match="PyTreeLoader"):
        DatasetReader(MDS / "mds_zstd", item_loader=TokensLoader(4))


def test_brotli_without_the_package_names_the_install_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = _recompress(tmp_path, "br", lambda d: d)
    monkeypatch.setitem(sys.modules, "brotli", None)  # as if it were not installed: ``import brotli`` fails
    with pytest.raises(ImportError, match="pip install brotli"):
        DatasetReader(copy)[0]
