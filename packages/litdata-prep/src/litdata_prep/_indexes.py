"""Putting a job's index together: worker ranks -> node -> ``index.json``, published last.

Every worker leaves ``{rank}.index.json`` in the node's staging folder. The node concatenates
them in rank order (each rank's chunks in the order written) after the chunks of an existing
dataset (``mode="append"``). On one node that is ``index.json``; with several nodes each node
publishes ``{node_rank}-index.json`` to the output and the last node waits for all of them,
merges them and publishes ``index.json``, so readers never see a half-written dataset.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from litdata_prep._output import Output

__all__ = [
    "CHUNK_NAME",
    "INDEX",
    "merge_parts",
    "next_chunk_indexes",
    "node_index_key",
    "read_rank_indexes",
    "wait_for_node_indexes",
]

INDEX = "index.json"
#: ``chunk-{rank}-{index}.bin`` or ``chunk-{rank}-{index}.{compression}.bin``.
CHUNK_NAME = re.compile(r"^chunk-(\d+)-(\d+)(\.[A-Za-z0-9:]+)?\.bin$")
_JPEG_LIKE = {"pil", "jpeg"}


def node_index_key(node_rank: int) -> str:
    return f"{node_rank}-{INDEX}"


def next_chunk_indexes(existing: dict[str, Any] | None, ranks: list[int]) -> dict[int, int]:
    """For each rank, the first chunk number not used by the existing dataset's chunk files."""
    start = dict.fromkeys(ranks, 0)
    for chunk in (existing or {}).get("chunks", []):
        match = CHUNK_NAME.match(str(chunk.get("filename", "")))
        if match and int(match.group(1)) in start:
            start[int(match.group(1))] = max(start[int(match.group(1))], int(match.group(2)) + 1)
    return start


def read_rank_indexes(staging: Path, ranks: list[int]) -> list[dict[str, Any]]:
    """The rank index files the node's workers left in ``staging``, in rank order."""
    parts = []
    for rank in ranks:
        path = staging / f"{rank}.index.json"
        if not path.is_file():
            raise RuntimeError(f"worker {rank} finished without writing {path}; the job cannot be completed")
        parts.append(json.loads(path.read_text()))
    return parts


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    keys = ("data_spec", "compression", "compression_level", "encryption", "item_loader")
    out = {key: config.get(key) for key in keys}
    out["data_format"] = ["jpeg" if f in _JPEG_LIKE else f for f in config.get("data_format") or []]
    return out


def merge_parts(existing: dict[str, Any] | None, parts: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """One index: ``existing``'s chunks, then each part's, in order; their configs must agree.

    Parts without chunks (a worker whose inputs were all filtered out) are skipped.
    """
    chunks: list[dict[str, Any]] = list((existing or {}).get("chunks", []))
    config: dict[str, Any] | None = (existing or {}).get("config")
    for number, part in enumerate(parts):
        if not part.get("chunks"):
            continue
        part_config = part.get("config") or {}
        if config is None:
            config = part_config
        elif _comparable(config) != _comparable(part_config):
            ours, theirs = _comparable(config), _comparable(part_config)
            diff = sorted(k for k in ours if ours[k] != theirs.get(k))
            what = "the existing dataset" if existing else "the first part"
            raise ValueError(
                f"{source}: part {number} was written with a different sample layout than {what} "
                f"(fields {diff}: {[ours[k] for k in diff]} vs {[theirs.get(k) for k in diff]}); every sample "
                "must have the same structure and types, and mode='append' must add samples like the existing ones"
            )
        chunks.extend(part["chunks"])
    return {"chunks": chunks, "config": config, "updated_at": str(time.time())}


def merge_timeout() -> float:
    """Seconds the last node waits for the other nodes (``LITDATA_NODE_MERGE_TIMEOUT``, default 6 h)."""
    raw = os.environ.get("LITDATA_NODE_MERGE_TIMEOUT", str(6 * 3600))
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"LITDATA_NODE_MERGE_TIMEOUT={raw!r} must be a number of seconds") from None


def wait_for_node_indexes(
    output: Output, num_nodes: int, job: str, timeout: float | None = None
) -> list[dict[str, Any]]:
    """The per-node indexes of job ``job`` from the output, waiting until every node published its own."""
    timeout = merge_timeout() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    found: dict[int, dict[str, Any]] = {}
    delay = 0.1
    while True:
        for node in range(num_nodes):
            if node in found:
                continue
            obj = output.read_json(node_index_key(node))
            if obj is not None and obj.get("job") == job:
                found[node] = obj
        if len(found) == num_nodes:
            return [found[n] for n in range(num_nodes)]
        if time.monotonic() > deadline:
            missing = [n for n in range(num_nodes) if n not in found]
            raise TimeoutError(
                f"{output.display}: waited {timeout:.0f}s for nodes {missing} to publish their part of the index; "
                "did they fail? (set LITDATA_NODE_MERGE_TIMEOUT to wait longer)"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 5.0)
