"""Small datasets of ids, written by our writer, that the upstream comparison tests read with both libraries."""

from __future__ import annotations

from pathlib import Path

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader


def make_ids(path: Path, n: int, offset: int, chunk_size: int = 7) -> str:
    """A dataset at ``path`` of ``n`` samples ``{"id": offset + i}`` in chunks of ``chunk_size``; its path."""
    writer = BinaryWriter(path, chunk_size=chunk_size)
    for i in range(n):
        writer.add_item(i, {"id": offset + i})
    writer.done()
    writer.merge()
    return str(path)


def id_batches(loader: StreamingDataLoader, stop: int | None = None) -> list[list[int]]:
    """The ids of each batch ``loader`` yields, stopping after ``stop`` batches if given."""
    out = []
    for batch in loader:
        out.append([int(i) for i in batch["id"]])
        if stop is not None and len(out) == stop:
            break
    return out


def flat(batches: list[list[int]]) -> list[int]:
    return [i for batch in batches for i in batch]
