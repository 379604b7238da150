"""The key index file: what it holds, and keys that cannot go into it."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from litdata_format.internal import keys_parquet, normalize_key, read_keys


def test_rows_are_sorted_by_key_with_the_chunk_of_each_sample() -> None:
    data = keys_parquet([("b", 0), ("c", 1), ("a", 2), ("d", 5)], chunk_sizes=[2, 2, 2])
    table = pq.read_table(io.BytesIO(data))
    assert table.schema.types == [pa.string(), pa.int64(), pa.int32(), pa.int32()]
    assert table.to_pydict() == {
        "key": ["a", "b", "c", "d"],
        "index": [2, 0, 1, 5],
        "chunk_index": [1, 0, 0, 2],
        "chunk_offset": [2, 0, 1, 5],
    }
    assert read_keys([data], "here") == {"a": 2, "b": 0, "c": 1, "d": 5}


def test_int_keys_are_int64() -> None:
    table = pq.read_table(io.BytesIO(keys_parquet([(7, 0), (-3, 1)], chunk_sizes=[2])))
    assert table.column("key").type == pa.int64() and table.column("key").to_pylist() == [-3, 7]


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([("a", 0), ("a", 1)], "the key 'a' for samples 0 and 1"),
        ([("a", 0), (1, 1)], "both str and int keys"),
        ([("a", 4)], "outside the dataset's 2 samples"),
    ],
)
def test_bad_key_sets_are_refused(pairs: list[tuple[str | int, int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        keys_parquet(pairs, chunk_sizes=[2])


def test_keys_are_str_or_int() -> None:
    assert normalize_key(b"caf\xc3\xa9") == "café"
    assert normalize_key(np.int32(4)) == 4 and type(normalize_key(np.int64(4))) is int
    for bad in (None, True, 1.5, ("a",)):
        with pytest.raises(TypeError, match="a key must be a str or an int"):
            normalize_key(bad)


def test_a_damaged_index_is_named() -> None:
    with pytest.raises(ValueError, match="ds/keys: the key index cannot be read"):
        read_keys([b"not parquet"], "ds/keys")
