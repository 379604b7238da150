"""``optimize(key_fn=...)``: gather the keys the workers computed and publish the key index.

Each worker writes the keys of its samples, in its own sample order, to ``{rank}.keys.json``
in the node's staging folder. A worker's samples fill its chunks in that order, so once the
index is merged a key's sample position follows from where the rank's chunks landed: no
sample is read back. The Parquet layout is ``litdata_format``'s (upstream's).
"""

from __future__ import annotations

from typing import Any

from litdata_format import DatasetIndex
from litdata_format.internal import KEYS_FILE, keys_parquet, parse_chunk_name, read_keys
from litdata_prep._output import Output

__all__ = ["KEYS_DIR", "publish_keys"]

KEYS_DIR = KEYS_FILE.partition("/")[0] + "/"
_SECTION = {"version": 1, "num_shards": 1, "sharding": "none"}


def _existing_pairs(output: Output, existing: DatasetIndex | None) -> list[tuple[Any, int]]:
    """The keys of the dataset appended to, when it has a key index."""
    if existing is None:
        return []
    try:
        data = output.get(KEYS_FILE)
    except FileNotFoundError:
        return []
    return list(read_keys([data], output.url_for(KEYS_FILE)).items())


def publish_keys(
    output: Output, index: DatasetIndex, existing: DatasetIndex | None, rank_keys: dict[int, list[Any]]
) -> dict[str, Any]:
    """Write the key index of ``index``'s new chunks (and of the dataset appended to).

    Returns the ``"keys"`` entry of ``index.json`` that names it.

    Raises:
        ValueError: two samples share a key, keys mix str and int, or a rank's keys do not match its chunks.
    """
    old = {chunk.filename for chunk in existing.chunks} if existing is not None else set()
    positions: dict[int, list[int]] = {rank: [] for rank in rank_keys}
    start = 0
    for chunk in index.chunks:
        parsed = parse_chunk_name(chunk.filename)
        if chunk.filename not in old and parsed is not None and parsed[0] in positions:
            positions[parsed[0]].extend(range(start, start + chunk.chunk_size))
        start += chunk.chunk_size
    pairs = _existing_pairs(output, existing)
    for rank, keys in rank_keys.items():
        if len(keys) != len(positions[rank]):
            raise RuntimeError(
                f"worker {rank} computed {len(keys)} keys but its chunks hold {len(positions[rank])} samples"
            )
        pairs.extend(zip(keys, positions[rank]))
    output.put(KEYS_FILE, keys_parquet(pairs, [chunk.chunk_size for chunk in index.chunks]))
    return dict(_SECTION)
