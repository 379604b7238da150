"""Putting a job's index together: worker ranks -> node -> ``index.json``, published last.

A node concatenates its workers' indexes in rank order (with the shared queue, every chunk by the
first input it holds: :func:`in_input_order`) after an existing dataset's chunks (``mode="append"``).
With several nodes each publishes ``{node_rank}-index.json`` and the last one merges them into
``index.json``, so readers never see a half-written dataset.
"""

from __future__ import annotations

import time
from typing import Any

from litdata_format import INDEX_FILENAME, DatasetIndex, parse_index
from litdata_format.internal import parse_chunk_name, read_seconds
from litdata_prep._output import Output

__all__ = [
    "LAYOUT_HINT",
    "in_input_order",
    "next_chunk_indexes",
    "node_index_key",
    "wait_for_node_indexes",
]

#: What to do when a worker's (or an existing dataset's) samples are stored differently from the others'.
LAYOUT_HINT = (
    "Every sample must have the same structure and leaf types, and mode='append' must add samples like the "
    "existing ones (a PIL image is stored as 'jpeg' if it is a JPEG file and as 'pil' otherwise: wrap images "
    "in Jpeg(...) or Pil(...) to store them all one way)."
)


def node_index_key(node_rank: int) -> str:
    return f"{node_rank}-{INDEX_FILENAME}"


def next_chunk_indexes(existing: DatasetIndex | None, ranks: list[int]) -> dict[int, int]:
    """For each rank, the first chunk number not used by the existing dataset's chunk files."""
    start = dict.fromkeys(ranks, 0)
    for chunk in existing.chunks if existing is not None else ():
        parsed = parse_chunk_name(chunk.filename)
        if parsed is not None and parsed[0] in start:
            start[parsed[0]] = max(start[parsed[0]], parsed[1] + 1)
    return start


def in_input_order(parts: list[DatasetIndex], firsts: list[list[int] | None], ranks: list[int]) -> list[DatasetIndex]:
    """The chunks of the shared queue's workers as one-chunk parts, ordered by the inputs they hold.

    ``firsts`` holds, per worker, the position of the input each of its chunks' first sample came from
    (its ``Done.chunk_inputs``). A worker's chunks never mix two runs of consecutive inputs, so listing
    every chunk by that position lists the samples in input order.

    Raises:
        RuntimeError: a worker's positions do not match its chunks.
    """
    entries: list[tuple[int, int, int, DatasetIndex]] = []
    for part, chunk_firsts, rank in zip(parts, firsts, ranks, strict=True):
        if chunk_firsts is None or len(chunk_firsts) != len(part.chunks):
            raise RuntimeError(
                f"optimize: worker {rank} wrote {len(part.chunks)} chunks but reported the inputs of "
                f"{chunk_firsts!r}; the job cannot be completed"
            )
        for n, (chunk, first) in enumerate(zip(part.chunks, chunk_firsts)):
            entries.append((first, rank, n, DatasetIndex([chunk], part.config, part.updated_at, part.source)))
    entries.sort(key=lambda entry: entry[:3])
    return [entry[3] for entry in entries]


def wait_for_node_indexes(output: Output, num_nodes: int, job: str) -> list[tuple[DatasetIndex, dict[str, Any]]]:
    """The per-node indexes of job ``job`` from the output, waiting until every node published its own.

    Each comes with the JSON object it was read from, which also holds the keys its workers computed
    (``key_fn``). The wait ends after ``LITDATA_NODE_MERGE_TIMEOUT`` seconds (default 6 h).
    """
    timeout = read_seconds("LITDATA_NODE_MERGE_TIMEOUT")
    timeout = 6 * 3600.0 if timeout is None else timeout
    deadline = time.monotonic() + timeout
    found: dict[int, tuple[DatasetIndex, dict[str, Any]]] = {}
    delay = 0.1
    while True:
        for node in (n for n in range(num_nodes) if n not in found):
            key = node_index_key(node)
            obj = output.read_json(key)
            if obj is not None and obj.get("job") == job:
                found[node] = (parse_index(obj, output.url_for(key)), obj)
        if len(found) == num_nodes:
            return [found[n] for n in range(num_nodes)]
        if time.monotonic() > deadline:
            missing = [n for n in range(num_nodes) if n not in found]
            raise TimeoutError(
                f"{output.url}: waited {timeout:.0f}s for nodes {missing} to publish their part of the index; "
                "did they fail? (set LITDATA_NODE_MERGE_TIMEOUT to wait longer)"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 5.0)
