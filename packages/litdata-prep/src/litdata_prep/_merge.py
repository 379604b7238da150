"""``merge_datasets``: several optimized datasets into one, by copying their chunks under new names."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from litdata_format import INDEX_FILENAME, DatasetIndex, merge_indexes
from litdata_format.internal import chunk_name, plain_chunk_name
from litdata_io import Dir
from litdata_prep._checks import open_output
from litdata_prep._output import DatasetExistsError, Output, make_staging
from litdata_prep._output_lock import hold_output

__all__ = ["merge_datasets"]


def _read_index(source: Output) -> DatasetIndex:
    index = source.read_index()
    if index is None:
        raise ValueError(
            f"merge_datasets: input_dir {source.url} has no index.json; is it an optimized dataset (and there)?"
        )
    return index


def _copy(source: Output, old: str, target: Output, new: str, staging: Path) -> None:
    """Chunk ``old`` of ``source`` as ``new`` of ``target``: downloaded into the target's staging folder, published."""
    source.download(old, staging / new)
    target.publish(staging / new, new)


def merge_datasets(
    input_dirs: Sequence[str | os.PathLike[str] | Dir],
    output_dir: str | os.PathLike[str] | Dir,
    max_workers: int | None = os.cpu_count(),
    storage_options: dict[str, Any] | None = None,
) -> None:
    """Merge optimized datasets into ``output_dir``: their samples, in the order of ``input_dirs``.

    Chunks are copied (locally, or between buckets) as ``chunk-0-{n}``; ``index.json`` is written
    last. The datasets must share their sample layout and compression.

    Args:
        input_dirs: two or more optimized datasets (local folders or URLs).
        output_dir: a new, empty location (local folder or URL).
        max_workers: concurrent copies.
        storage_options: credentials and endpoint for the URLs.
    """
    if len(input_dirs) < 2:
        raise ValueError(
            f"merge_datasets: The input directories needs to be defined: give at least two input_dirs to merge, "
            f"got {len(input_dirs)}"
        )
    target = open_output(output_dir, storage_options, "merge_datasets")
    sources = [Output.at(d, storage_options) for d in input_dirs]
    for source in sources:
        if source.url == target.url:
            raise ValueError(f"merge_datasets: output_dir {target.url} is also one of the input_dirs")
    indexes = [_read_index(s) for s in sources]
    with hold_output(target, None, what="merge_datasets") as lock:  # another job writing it is waited for
        if target.exists(INDEX_FILENAME):
            raise DatasetExistsError(
                f"merge_datasets: output_dir {target.url} already holds an optimized dataset; choose a new output_dir"
            )
        copies: list[tuple[Output, str, str]] = []
        renamed = []
        for source, index in zip(sources, indexes):
            chunks = []
            for chunk in index.chunks:
                # A whole-file compressed chunk keeps its suffix; an uncompressed one or one with
                # compressed frames inside (upstream's compression_level="sample") gets none.
                whole_file = plain_chunk_name(chunk, index.compression) != chunk.filename
                new = chunk_name(0, len(copies), index.compression if whole_file else None)
                copies.append((source, chunk.filename, new))
                chunks.append(dataclasses.replace(chunk, filename=new))
            renamed.append(DatasetIndex(chunks, index.config, index.updated_at, source.url))
        merged = merge_indexes(
            renamed, f"merge_datasets: {target.url}", "Only datasets of the same layout can be merged."
        )
        staging = make_staging(target, 0, "merge_datasets")
        try:
            with ThreadPoolExecutor(max_workers=max(1, max_workers or 1)) as pool:
                for future in [pool.submit(_copy, s, old, target, new, staging) for s, old, new in copies]:
                    future.result()
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        lock.confirm()
        target.write_json(INDEX_FILENAME, merged.to_json())
