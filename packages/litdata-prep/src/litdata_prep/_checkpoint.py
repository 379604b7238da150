"""Checkpoints of ``optimize(..., use_checkpoint=True)``: a killed job resumes where it stopped.

Whenever one of a worker's chunks reaches the output, the worker publishes
``.checkpoints/checkpoint-{rank}.json``: its chunks, and where the next unwritten sample starts (input
``next_input`` of its slice, after ``skip_samples`` samples a generator ``fn`` already put in a chunk).
Samples buffered in memory are produced again on resume, so a resumed job writes exactly the samples
of an uninterrupted one, provided ``fn`` is deterministic. With ``key_fn``, each published chunk's keys
go to ``.checkpoints/keys-{chunk file}.json`` before the checkpoint naming the chunk.
``.checkpoints/node-{node_rank}.json`` pins the worker count and each slice's fingerprint, so a resume
with other inputs or workers is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from litdata_format import INDEX_FILENAME
from litdata_format.internal import parse_chunk_name
from litdata_prep._inputs import Numbered
from litdata_prep._output import Output

__all__ = [
    "CHECKPOINT_DIR",
    "WorkerCheckpoint",
    "chunk_keys_name",
    "clear_checkpoints",
    "fingerprint",
    "load_checkpoints",
    "save_node_config",
]

CHECKPOINT_DIR = ".checkpoints"


@dataclass
class WorkerCheckpoint:
    """Where one worker is: the chunks it published and the first sample it has not."""

    rank: int
    next_input: int = 0  # position, in the worker's slice, of the input to process next
    skip_samples: int = 0  # samples of that input already inside published chunks
    next_sample: int = 0
    next_chunk_index: int = 0
    chunks: list[dict[str, Any]] = field(default_factory=list)  # index.json entries of the published chunks
    config: dict[str, Any] | None = None  # the writer's config once it wrote a sample
    # The writer's resume_state() after its last published chunk: the resumed writer cuts the same chunks.
    writer: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{CHECKPOINT_DIR}/checkpoint-{self.rank}.json"

    @classmethod
    def from_json(cls, obj: Any, source: str) -> WorkerCheckpoint:
        try:
            return cls(**obj)
        except TypeError as err:
            raise ValueError(f"{source}: not a checkpoint written by this version of litdata ({err})") from None


def fingerprint(items: Iterable[tuple[int, Any]]) -> str:
    """A short digest of a worker's slice (positions and reprs), to recognise the same job again."""
    digest = hashlib.sha256()
    for pos, item in items:
        digest.update(f"{pos}:{item!r}\n".encode(errors="replace"))
    return digest.hexdigest()[:32]


def chunk_keys_name(chunk_filename: str) -> str:
    """Where the keys of the samples in a published chunk are kept until the job finishes."""
    return f"{CHECKPOINT_DIR}/keys-{chunk_filename}.json"


def _node_key(node_rank: int) -> str:
    return f"{CHECKPOINT_DIR}/node-{node_rank}.json"


def save_node_config(output: Output, node_rank: int, slices: list[Numbered], ranks: list[int]) -> None:
    """Record this node's worker count and slice fingerprints before its workers start."""
    output.write_json(
        _node_key(node_rank),
        {"num_workers": len(slices), "ranks": ranks, "slices": [fingerprint(s) for s in slices]},
    )


def load_checkpoints(
    output: Output, node_rank: int, slices: list[Numbered], ranks: list[int]
) -> list[WorkerCheckpoint]:
    """The checkpoints of this node's workers (fresh ones when none); a ValueError if of other workers or inputs."""
    config = output.read_json(_node_key(node_rank))
    if config is None:
        return [WorkerCheckpoint(rank) for rank in ranks]
    where = output.url_for(_node_key(node_rank))
    if config.get("num_workers") != len(slices) or config.get("ranks") != ranks:
        raise ValueError(
            f"{where}: the interrupted run used num_workers={config.get('num_workers')}, this one uses "
            f"{len(slices)}; resume with the same num_workers, or pass mode='overwrite' to start over"
        )
    if config.get("slices") != [fingerprint(s) for s in slices]:
        raise ValueError(
            f"{where}: the inputs differ from the interrupted run's; resume with the same inputs, or pass "
            "mode='overwrite' to start over"
        )
    found = []
    for rank in ranks:
        state = WorkerCheckpoint(rank)
        obj = output.read_json(state.key)
        found.append(state if obj is None else WorkerCheckpoint.from_json(obj, output.url_for(state.key)))
    return found


def published_before_cleanup(output: Output, node_rank: int, slices: list[Numbered], ranks: list[int]) -> bool:
    """Whether this job (same workers and inputs) published ``index.json``, then stopped before removing checkpoints."""
    if not output.exists(INDEX_FILENAME) or output.read_json(_node_key(node_rank)) is None:
        return False
    try:
        load_checkpoints(output, node_rank, slices, ranks)
    except ValueError:  # another job's checkpoints: the dataset is not this job's
        return False
    return True


def clear_checkpoints(output: Output, node_rank: int, ranks: list[int]) -> None:
    """Remove this node's checkpoint files (and the chunk keys its workers kept)."""
    keys = [_node_key(node_rank)] + [WorkerCheckpoint(rank).key for rank in ranks]
    prefix = chunk_keys_name("")[: -len(".json")]
    for key in output.all_keys():
        parsed = parse_chunk_name(key[len(prefix) : -len(".json")]) if key.startswith(prefix) else None
        if parsed is not None and parsed[0] in ranks:
            keys.append(key)
    output.delete_many([k for k in keys if output.exists(k)])
