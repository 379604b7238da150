"""Bad input gets an error that names the thing (file, sample, field) and nothing is left half-written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from litdata_format import BinaryWriter, DatasetReader, Serializer, load_index


def _dataset(path: Path, n: int = 6, **kwargs: object) -> Path:
    writer = BinaryWriter(path, chunk_size=3, **kwargs)  # type: ignore[arg-type]
    for i in range(n):
        writer.write({"i": i, "a": np.arange(3)})
    writer.done()
    writer.merge()
    return path


def _edit_index(path: Path, edit: object) -> None:
    index = json.loads((path / "index.json").read_text())
    edit(index)  # type: ignore[operator]
    (path / "index.json").write_text(json.dumps(index))


def test_chunk_size_and_chunk_bytes_both(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either chunk_size or chunk_bytes"):
        BinaryWriter(tmp_path, chunk_size=1, chunk_bytes=10)


@pytest.mark.parametrize("value", ["64XB", "-1", "", 0, "abc"])
def test_bad_chunk_bytes(tmp_path: Path, value: object) -> None:
    with pytest.raises(ValueError, match="chunk_bytes"):
        BinaryWriter(tmp_path, chunk_bytes=value)  # type: ignore[arg-type]


def test_bad_compression(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="zstd:1"):
        BinaryWriter(tmp_path, compression="gzip")
    with pytest.raises(ValueError, match="from 1 to 22"):
        BinaryWriter(tmp_path, compression="zstd:30")


def test_structure_change(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=3)  # an array: PyTree items (dicts of JSON values are Arrow rows)
    writer.write({"a": 1, "v": np.zeros(2)})
    with pytest.raises(ValueError, match="sample 1 has a different structure") as err:
        writer.write({"a": 1, "b": 2, "v": np.zeros(2)})
    # Where the sample departs from the first one, in words (not two tree-spec JSON strings).
    assert "sample has the keys 'a', 'b', 'v' where the first sample had 'a', 'v'" in str(err.value)
    assert "children_spec" not in str(err.value) and "pyarrow" not in str(err.value)
    with pytest.raises(ValueError, match=r"sample\['v'\] is a list where the first sample had a value"):
        writer.write({"a": 1, "v": [1, 2, 3]})
    with pytest.raises(ValueError, match=r"sample\['a'\]\[1\] is a tuple of 1 items where the first sample's had 2"):
        first = BinaryWriter(tmp_path / "b", chunk_size=3)
        first.write({"a": [0, (1, 2)], "v": np.zeros(2)})
        first.write({"a": [0, (1,)], "v": np.zeros(2)})


def test_records_with_lists_of_other_lengths_name_the_extra_without_pyarrow(tmp_path: Path) -> None:
    # litdata-format installed alone: no pyarrow, so record dicts are PyTree items of one structure.
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"  # what an environment without pyarrow looks like
        "from litdata_format import BinaryWriter\n"
        f"writer = BinaryWriter({str(tmp_path)!r}, chunk_size=10)\n"
        "writer.add_item(0, {'tokens': [1, 2], 'text': 'a'})\n"
        "writer.add_item(1, {'tokens': [1, 2, 3], 'text': 'b'})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert out.returncode == 1
    assert "sample['tokens'] is a list of 3 items where the first sample's had 2" in out.stderr, out.stderr
    assert 'pip install "litdata-format[arrow]"' in out.stderr and "children_spec" not in out.stderr


class Blob:  # pickled: its serializer takes anything, so only the structure check stops a dict
    pass


def test_structure_change_inside_a_flat_dict(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=3)
    writer.write({"a": 1, "b": Blob()})
    with pytest.raises(ValueError, match="sample 1 has a different structure"):
        writer.write({"a": 1, "b": {"nested": 2}})
    with pytest.raises(ValueError, match="sample 1 has a different structure"):
        writer.write({"b": Blob(), "a": 1})  # same keys, another order: other leaves' order
    writer.write({"a": 2, "b": Blob()})


def test_leaf_type_change(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=3)
    writer.write({"a": 1, "v": np.zeros(2)})
    with pytest.raises(TypeError, match=r"sample 1, leaf 0 \(sample\['a'\]\): a str cannot be stored as 'int'"):
        writer.write({"a": "x", "v": np.zeros(2)})


def test_dtype_change(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=3)
    writer.write(np.arange(3, dtype=np.int64))
    with pytest.raises(TypeError, match="sample 1, leaf 0"):
        writer.write(np.arange(3, dtype=np.int32))


def test_missing_index(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no index.json"):
        DatasetReader(tmp_path)


def test_pending_rank_files_hint(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=3)
    writer.write(1)
    writer.done()
    with pytest.raises(FileNotFoundError, match="complete_dataset"):
        load_index(tmp_path)


def test_malformed_index(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text('{"chunks": [')
    with pytest.raises(ValueError, match="index.json is not valid JSON"):
        load_index(tmp_path)
    (tmp_path / "index.json").write_text('{"chunks": []}')
    with pytest.raises(ValueError, match="'chunks' list and a 'config' object"):
        load_index(tmp_path)


@pytest.mark.parametrize(
    "name", ["../evil.bin", "sub/../../x.bin", "..", "a\\b.bin", "/abs.bin", "sub//x.bin", "sub/.x.bin"]
)
def test_chunk_filename_outside_the_dataset(tmp_path: Path, name: str) -> None:
    _dataset(tmp_path)
    _edit_index(tmp_path, lambda index: index["chunks"][0].update(filename=name))
    with pytest.raises(ValueError, match="not a relative path inside the dataset"):
        load_index(tmp_path)


def test_chunk_in_a_subfolder(tmp_path: Path) -> None:
    _dataset(tmp_path)
    (tmp_path / "train").mkdir()
    first = json.loads((tmp_path / "index.json").read_text())["chunks"][0]["filename"]
    (tmp_path / first).rename(tmp_path / "train" / first)
    _edit_index(tmp_path, lambda index: index["chunks"][0].update(filename=f"train/{first}"))
    assert [sample["i"] for sample in DatasetReader(tmp_path)] == list(range(6))


def test_unknown_serializer(tmp_path: Path) -> None:
    _dataset(tmp_path)
    _edit_index(tmp_path, lambda index: index["config"].update(data_format=["int", "mystery:3"]))
    with pytest.raises(ValueError, match="serializer 'mystery'"):
        DatasetReader(tmp_path)


def test_truncated_chunk(tmp_path: Path) -> None:
    _dataset(tmp_path)
    chunk = tmp_path / "chunk-0-1.bin"
    chunk.write_bytes(chunk.read_bytes()[:-5])
    reader = DatasetReader(tmp_path)
    assert reader[0]["i"] == 0
    with pytest.raises(ValueError, match=r"chunk chunk-0-1.bin at .* has \d+ bytes but index.json says \d+"):
        reader[4]  # the size the index gives tells first
    _edit_index(tmp_path, lambda index: index["chunks"][1].update(chunk_bytes=0))  # an index that gives none
    with pytest.raises(ValueError, match=r"chunk-0-1.bin: offsets end at \d+ but the file has"):
        DatasetReader(tmp_path)[4]


def test_offsets_past_end(tmp_path: Path) -> None:
    _dataset(tmp_path)
    chunk = tmp_path / "chunk-0-0.bin"
    data = bytearray(chunk.read_bytes())
    data[4:8] = (10**6).to_bytes(4, "little")
    chunk.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="chunk-0-0.bin: the offsets table is corrupt"):
        DatasetReader(tmp_path)[0]


def test_chunk_count_differs_from_index(tmp_path: Path) -> None:
    _dataset(tmp_path)
    _edit_index(tmp_path, lambda index: index["chunks"][0].update(chunk_size=2))
    with pytest.raises(ValueError, match="holds 3 items but index.json says 2"):
        DatasetReader(tmp_path)[0]


def test_item_loader_mismatch(tmp_path: Path) -> None:
    from litdata_format import TokensLoader

    _dataset(tmp_path)
    with pytest.raises(ValueError, match="written with PyTreeLoader, but it is being read with TokensLoader"):
        DatasetReader(tmp_path, item_loader=TokensLoader(4))


def test_out_of_range(tmp_path: Path) -> None:
    _dataset(tmp_path)
    with pytest.raises(IndexError, match="sample 6 is out of range"):
        DatasetReader(tmp_path)[6]


class Upper(Serializer):
    def serialize(self, data: str) -> tuple[bytes, str | None]:
        return data.upper().encode(), "upper"

    def deserialize(self, data: Any) -> str:
        return bytes(data).decode() + "!"

    def can_serialize(self, data: object) -> bool:
        return isinstance(data, str)


def test_user_serializer_wins(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=3, serializers={"upper": Upper()})
    writer.write({"s": "abc", "n": 1})
    writer.done()
    writer.merge()
    assert load_index(tmp_path).data_format == ["upper", "int"]
    with pytest.raises(ValueError, match="serializer 'upper'"):
        DatasetReader(tmp_path)
    assert DatasetReader(tmp_path, serializers={"upper": Upper()})[0] == {"s": "ABC!", "n": 1}


def test_not_a_serializer(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"serializers\['x'\] is a int"):
        BinaryWriter(tmp_path, serializers={"x": 1})  # type: ignore[dict-item]
