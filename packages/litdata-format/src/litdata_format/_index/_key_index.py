"""The key index: ``keys/shard-00000.parquet`` next to ``index.json``, mapping a sample's key to its position.

``optimize(key_fn=...)`` writes it (upstream 0.2.76's layout, which its ``StreamingDataset``
reads): a Parquet file sorted by ``key`` with the columns

==============  ======================  ===============================================
column          type                    meaning
==============  ======================  ===============================================
``key``         string or int64         what ``key_fn`` returned for the sample
``index``       int64                   the sample's position in the dataset
``chunk_index`` int32                   the chunk holding it (its place in ``chunks``)
``chunk_offset`` int32                  the sample's position again (upstream's reader
                                        takes it as the dataset-wide index)
==============  ======================  ===============================================

and ``index.json`` gets ``"keys": {"version": 1, "num_shards": 1, "sharding": "none"}``.
Upstream spreads large indexes over several shards by a hash of the key; every shard is read
here, so either layout works. An older single ``keys.parquet`` at the dataset's root is read
too. pyarrow is imported on first use.
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Sequence
from typing import Any

from litdata_format._guards import is_bytes_like
from litdata_format._optional import import_optional

__all__ = ["KEYS_FILE", "keys_parquet", "normalize_key", "read_keys"]

KEYS_FILE = "keys/shard-00000.parquet"


def normalize_key(key: Any, where: str = "key_fn") -> str | int:
    """``key`` as a str or an int (bytes are UTF-8 text, numpy integers ints); anything else is refused.

    Raises:
        TypeError: ``key`` is neither a str, an int, bytes nor a numpy integer (the message names ``where``).
    """
    if isinstance(key, bool) or key is None:
        raise TypeError(f"{where} returned {key!r}; a key must be a str or an int")
    if isinstance(key, (str, int)):
        return key
    if is_bytes_like(key):
        return bytes(key).decode("utf-8")
    if hasattr(key, "dtype") and getattr(key.dtype, "kind", "") in "iu" and getattr(key, "ndim", 1) == 0:
        return int(key)
    raise TypeError(f"{where} returned a {type(key).__name__} ({key!r:.80}); a key must be a str or an int")


def keys_parquet(pairs: Sequence[tuple[str | int, int]], chunk_sizes: Sequence[int]) -> bytes:
    """The key index of ``(key, sample position)`` pairs in a dataset whose chunks hold ``chunk_sizes`` samples.

    Raises:
        ValueError: two samples have the same key, keys mix str and int, or a position is outside the dataset.
    """
    pq = import_optional("pyarrow.parquet", "arrow", "writing the key index of optimize(key_fn=...)")
    pa = import_optional("pyarrow", "arrow", "writing the key index")
    kinds = {type(key) for key, _ in pairs}
    if len(kinds) > 1:
        raise ValueError("key_fn returned both str and int keys; all keys of a dataset must be of one type")
    seen: dict[str | int, int] = {}
    for key, position in pairs:
        other = seen.setdefault(key, position)
        if other != position:
            raise ValueError(f"key_fn returned the key {key!r} for samples {other} and {position}; keys must be unique")
    starts = [0]
    for size in chunk_sizes:
        starts.append(starts[-1] + size)
    ordered = sorted(pairs, key=lambda pair: pair[0])
    index = [position for _, position in ordered]
    if index and not 0 <= min(index) <= max(index) < starts[-1]:
        raise ValueError(f"a keyed sample position is outside the dataset's {starts[-1]} samples")
    table = pa.table(
        {
            "key": pa.array([key for key, _ in ordered], type=pa.string() if str in kinds else pa.int64()),
            "index": pa.array(index, type=pa.int64()),
            "chunk_index": pa.array([bisect.bisect_right(starts, i) - 1 for i in index], type=pa.int32()),
            "chunk_offset": pa.array(index, type=pa.int32()),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def read_keys(files: Sequence[bytes], where: str) -> dict[str | int, int]:
    """Key -> sample position, from the bytes of each Parquet shard of a key index.

    Raises:
        ValueError: a shard cannot be read as Parquet (the message names ``where``, the key index).
    """
    pq = import_optional("pyarrow.parquet", "arrow", "looking samples up by key")
    pa = import_optional("pyarrow", "arrow", "looking samples up by key")
    lookup: dict[str | int, int] = {}
    for data in files:
        try:
            # One file, read on this thread: read_table runs Arrow's thread pools (pyarrow.dataset, Acero),
            # and with torch loaded too the interpreter's exit could then abort (SIGABRT).
            table = pq.ParquetFile(pa.BufferReader(data)).read(columns=["key", "index"], use_threads=False)
        except (pa.ArrowException, OSError) as err:
            raise ValueError(f"{where}: the key index cannot be read ({err}); it is damaged") from None
        lookup.update(zip(table.column("key").to_pylist(), table.column("index").to_pylist()))
    return lookup
