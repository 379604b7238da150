"""Every malformed field of index.json fails with an error that names the file and the field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from litdata_format import BinaryWriter, DatasetReader

Edit = Callable[[dict[str, Any]], Any]


def _config(key: str, value: Any) -> Edit:
    def edit(index: dict[str, Any]) -> None:
        index["config"][key] = value

    return edit


def _drop_config(key: str) -> Edit:
    def edit(index: dict[str, Any]) -> None:
        del index["config"][key]

    return edit


def _entry(key: str, value: Any) -> Edit:
    def edit(index: dict[str, Any]) -> None:
        index["chunks"][1][key] = value

    return edit


def _drop_entry(key: str) -> Edit:
    def edit(index: dict[str, Any]) -> None:
        del index["chunks"][1][key]

    return edit


def _top(key: str, value: Any) -> Edit:
    def edit(index: dict[str, Any]) -> None:
        index[key] = value

    return edit


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


HUGE = 2**63
CASES: list[tuple[str, Edit | bytes, str]] = [
    # config.data_format
    ("data_format missing", _drop_config("data_format"), "config is missing 'data_format'"),
    ("data_format null", _config("data_format", None), "config.data_format must be a list"),
    ("data_format int", _config("data_format", 3), "config.data_format must be a list"),
    ("data_format null entry", _config("data_format", [None, "int"]), "config.data_format[0]"),
    ("data_format int entry", _config("data_format", ["no_header_numpy:9", 7]), "config.data_format[1]"),
    ("data_format empty entry", _config("data_format", ["", "int"]), "config.data_format[0]"),
    ("bogus tensor dtype", _config("data_format", ["no_header_tensor:999", "int"]), "config.data_format[0]"),
    ("negative numpy dtype", _config("data_format", ["no_header_numpy:-1", "int"]), "config.data_format[0]"),
    ("text numpy dtype", _config("data_format", ["no_header_numpy:abc", "int"]), "config.data_format[0]"),
    ("unknown serializer", _config("data_format", ["nosuch", "int"]), "config.data_spec / config.data_format"),
    ("too few formats", _config("data_format", ["int"]), "config.data_format"),
    # config.data_spec
    ("data_spec missing", _drop_config("data_spec"), "config is missing 'data_spec'"),
    ("data_spec int", _config("data_spec", 5), "config.data_spec must be null or a str"),
    ("data_spec not json", _config("data_spec", "{nope"), "config.data_spec"),
    ("data_spec wrong shape", _config("data_spec", "[1, 2]"), "config.data_spec"),
    ("data_spec deep", _config("data_spec", _deep(200_000)), "config.data_spec"),
    ("data_spec null with chunks", _config("data_spec", None), "config.data_spec"),
    # other config fields
    ("compression int", _config("compression", 4), "config.compression"),
    ("compression unknown", _config("compression", "gzip"), "config.compression"),
    ("encryption string", _config("encryption", "yes"), "config.encryption"),
    ("item_loader int", _config("item_loader", 5), "config.item_loader"),
    ("item_loader unknown", _config("item_loader", "NoSuchLoader"), "NoSuchLoader"),
    ("config chunk_size negative", _config("chunk_size", -1), "config: 'chunk_size'"),
    ("config chunk_size huge", _config("chunk_size", HUGE), "config: 'chunk_size'"),
    ("config chunk_size text", _config("chunk_size", "10"), "config: 'chunk_size'"),
    ("config chunk_bytes huge", _config("chunk_bytes", HUGE), "config: 'chunk_bytes'"),
    ("config chunk_bytes list", _config("chunk_bytes", []), "config: 'chunk_bytes'"),
    ("config null", _top("config", None), "'config' object"),
    ("config list", _top("config", []), "'config' object"),
    # chunks and their entries
    ("chunks missing", lambda index: index.pop("chunks"), "'chunks' list"),
    ("chunks object", _top("chunks", {}), "'chunks' list"),
    ("entry int", lambda index: index["chunks"].__setitem__(1, 5), "chunks[1] must be an object"),
    ("entry null", lambda index: index["chunks"].__setitem__(1, None), "chunks[1] must be an object"),
    ("filename missing", _drop_entry("filename"), "chunks[1]: a chunk's filename"),
    ("filename int", _entry("filename", 3), "chunks[1]: a chunk's filename"),
    ("filename empty", _entry("filename", ""), "chunks[1]: a chunk's filename"),
    ("filename dotdot", _entry("filename", "../chunk-0-1.bin"), "chunks[1]: chunk filename"),
    ("filename absolute", _entry("filename", "/etc/passwd"), "chunks[1]: chunk filename"),
    ("filename hidden", _entry("filename", ".cache.bin"), "chunks[1]: chunk filename"),
    ("filename nul", _entry("filename", "a\x00b"), "chunks[1]: chunk filename"),
]
for _key in ("chunk_bytes", "chunk_size"):
    CASES += [
        (f"{_key} missing", _drop_entry(_key), f"chunks[1]: '{_key}' is missing"),
        (f"{_key} negative", _entry(_key, -1), f"chunks[1]: '{_key}' must be"),
        (f"{_key} 2**63", _entry(_key, HUGE), f"chunks[1]: '{_key}' must be"),
        (f"{_key} text", _entry(_key, "12"), f"chunks[1]: '{_key}' must be"),
        (f"{_key} bool", _entry(_key, True), f"chunks[1]: '{_key}' must be"),
        (f"{_key} float", _entry(_key, 1.5), f"chunks[1]: '{_key}' must be"),
        (f"{_key} null", _entry(_key, None), f"chunks[1]: '{_key}' must be"),
    ]


def _summing_past_int64(key: str) -> Edit:
    """2**15 + 1 entries each at the per-chunk bound (2**48): every field is valid, their sum is not."""

    def edit(index: dict[str, Any]) -> None:
        entry = index["chunks"][0]
        index["chunks"] = [{**entry, key: 2**48} for _ in range(2**15 + 1)]

    return edit


CASES += [
    (f"{key} summing past 2**63", _summing_past_int64(key), f"'{key}' values add up past 2**63 - 1 at chunks[32767]")
    for key in ("chunk_size", "dim", "chunk_bytes")
]
CASES += [
    ("dim negative", _entry("dim", -2), "chunks[1]: 'dim' must be"),
    ("dim huge", _entry("dim", HUGE), "chunks[1]: 'dim' must be"),
    ("dim text", _entry("dim", "3"), "chunks[1]: 'dim' must be"),
    # the file itself
    ("binary garbage", bytes(range(256)) * 4, "not valid JSON"),
    ("200k-deep nesting", _deep(200_000).encode(), "nests its values too deeply"),
    ("empty file", b"", "not valid JSON"),
    ("truncated", b'{"chunks": [', "not valid JSON"),
    ("top-level list", b"[]", "expected a JSON object"),
    ("top-level null", b"null", "expected a JSON object"),
    ("top-level number", b"1e999", "expected a JSON object"),
]


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("valid")
    writer = BinaryWriter(folder, chunk_size=2)
    for i in range(6):
        writer.add_item(i, {"tokens": np.arange(i + 1, dtype=np.int32), "label": i})
    writer.done()
    writer.merge()
    return folder


@pytest.mark.parametrize(("edit", "field"), [pytest.param(e, f, id=name) for name, e, f in CASES])
def test_malformed_index_names_file_and_field(valid: Path, tmp_path: Path, edit: Edit | bytes, field: str) -> None:
    for chunk in valid.glob("*.bin"):
        (tmp_path / chunk.name).write_bytes(chunk.read_bytes())
    if isinstance(edit, bytes):
        raw = edit
    else:
        index = json.loads((valid / "index.json").read_text())
        edit(index)
        raw = json.dumps(index).encode()
    path = tmp_path / "index.json"
    path.write_bytes(raw)
    with pytest.raises(ValueError) as err:
        reader = DatasetReader(tmp_path)
        list(reader)  # anything the index let through must still fail cleanly, never crash or hang
    message = str(err.value)
    assert str(path) in message, message
    assert field in message, message


def test_the_valid_index_reads(valid: Path) -> None:
    assert [s["label"] for s in DatasetReader(valid)] == list(range(6))
