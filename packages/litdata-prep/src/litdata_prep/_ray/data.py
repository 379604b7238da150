"""Ray Data both ways: read an optimized dataset as a ``ray.data.Dataset``, write one as a LitData dataset.

:class:`LitDataDatasource` splits a dataset by chunk: each read task fetches its own chunks.
:class:`LitDataDatasink` writes each write task's rows under the task's number (its rank); the
driver merges the tasks' indexes into ``index.json`` once every task finished, in task order, and
deletes the chunk files the index does not name (a failed attempt's).

A sample that is a dict with string keys is one row with those columns; any other sample is the
row ``{"item": sample}``, and a row whose only column is ``item`` is written back as that value.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from litdata_format import (
    INDEX_FILENAME,
    BinaryWriter,
    DatasetIndex,
    DatasetReader,
    merge_indexes,
    parse_index,
)
from litdata_format.internal import parse_chunk_name
from litdata_io import Dir
from litdata_prep._indexes import LAYOUT_HINT
from litdata_prep._output import DatasetExistsError, Output
from litdata_prep._publish import Publisher
from litdata_prep._ray.executor import import_ray
from litdata_prep._staging import temp_staging

import_ray()  # the install line, before the names below are looked up

import pandas  # noqa: E402  (ray[data] installs it)
from ray.data import Datasink, Datasource, ReadTask  # noqa: E402
from ray.data.block import Block, BlockAccessor, BlockMetadata  # noqa: E402

__all__ = ["LitDataDatasink", "LitDataDatasource"]

#: The column of a sample that is not a dict of named fields.
ITEM = "item"


def _row(sample: Any) -> dict[str, Any]:
    if isinstance(sample, dict) and sample and all(isinstance(k, str) for k in sample):
        return sample
    return {ITEM: sample}


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it came from (Ray's columns hold ints as numpy int64)."""
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        return value.item()
    return value


def _sample(row: Any) -> Any:
    sample = {name: _plain(row[name]) for name in row}
    return sample[ITEM] if list(sample) == [ITEM] else sample


def _read_chunks(source: Output, index: DatasetIndex, numbers: list[int]) -> Iterator[Block]:
    """One block per chunk of ``numbers`` (read where they are, or from a local copy of a bucket's)."""
    with source.local_copy([INDEX_FILENAME, *(index.chunks[n].filename for n in numbers)]) as folder:
        reader = DatasetReader(folder)
        starts = [0, *itertools.accumulate(reader.item_loader.items_in_chunk(c) for c in reader.index.chunks)]
        try:
            for n in numbers:
                yield pandas.DataFrame([_row(reader[i]) for i in range(starts[n], starts[n + 1])])
        finally:
            reader.close()


class LitDataDatasource(Datasource):
    """An optimized dataset as a Ray Data source: ``ray.data.read_datasource(LitDataDatasource(url))``.

    Args:
        input_dir: the dataset: a local folder (shared by every node) or a URL (``s3://...``).
        storage_options: credentials and endpoint for the URL.
    """

    def __init__(self, input_dir: str | os.PathLike[str] | Dir, storage_options: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.source = Output.at(input_dir, storage_options)
        index = self.source.read_index()
        if index is None:
            raise ValueError(
                f"LitDataDatasource: {self.source.url} has no {INDEX_FILENAME}; is it an optimized dataset?"
            )
        self.index = index

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(c.chunk_bytes for c in self.index.chunks) or None

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        """One task per run of chunks: about ``parallelism`` tasks, never one chunk split in two.

        Args:
            parallelism: the number of tasks Ray Data asks for.
            per_task_row_limit: Ray Data's row limit per task, passed on to each ``ReadTask``.
            data_context: Ray Data's context (not used).
        """
        chunks = self.index.chunks
        count = max(1, min(parallelism, len(chunks)))
        tasks = []
        for t in range(count):
            numbers = list(range(t * len(chunks) // count, (t + 1) * len(chunks) // count))
            if not numbers:
                continue
            meta = BlockMetadata(
                num_rows=sum(chunks[n].chunk_size for n in numbers),
                size_bytes=sum(chunks[n].chunk_bytes for n in numbers),
                input_files=tuple(chunks[n].filename for n in numbers),
                exec_stats=None,
            )
            read = functools.partial(_read_chunks, self.source, self.index, numbers)
            tasks.append(ReadTask(read, meta, per_task_row_limit=per_task_row_limit))
        return tasks


class LitDataDatasink(Datasink[dict[str, Any]]):
    """A Ray Data sink writing an optimized dataset: ``ds.write_datasink(LitDataDatasink(url, chunk_bytes="64MB"))``.

    ``StreamingDataset`` and upstream LitData read what it writes. Rows are written in each write
    task's order and the tasks one after another; set
    ``DataContext.get_current().execution_options.preserve_order = True`` to keep the dataset's order.

    Args:
        output_dir: a new dataset location: a local folder every node shares, or a URL.
        chunk_size: items per chunk. Give this or ``chunk_bytes`` (default ``"64MB"``).
        chunk_bytes: bytes per chunk, an int or a string such as ``"64MB"``.
        compression: ``None``, ``"zstd"`` or ``"zstd:N"``.
        storage_options: credentials and endpoint for the URL.
        mode: ``None`` (refuse a location that holds a dataset) or ``"overwrite"``.
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str] | Dir,
        chunk_size: int | None = None,
        chunk_bytes: int | str | None = None,
        compression: str | None = None,
        storage_options: dict[str, Any] | None = None,
        mode: str | None = None,
    ) -> None:
        if mode not in (None, "overwrite"):
            raise ValueError(f"LitDataDatasink: mode must be None or 'overwrite', got {mode!r}")
        if chunk_size is None and chunk_bytes is None:
            chunk_bytes = "64MB"
        self.output = Output.at(output_dir, storage_options)
        self.options: dict[str, Any] = dict(chunk_size=chunk_size, chunk_bytes=chunk_bytes, compression=compression)
        with tempfile.TemporaryDirectory() as tmp:
            BinaryWriter(tmp, **self.options)  # bad sizes or compression fail here, on the driver
        self.mode = mode

    def on_write_start(self, schema: Any = None) -> None:
        self.output.check_writable()
        if self.output.exists(INDEX_FILENAME):
            if self.mode != "overwrite":
                raise DatasetExistsError(
                    f"LitDataDatasink: {self.output.url} already holds an optimized dataset; choose a new "
                    "output_dir or pass mode='overwrite'"
                )
            self.output.delete(INDEX_FILENAME)

    def write(self, blocks: Iterable[Block], ctx: Any) -> dict[str, Any]:
        rank = int(ctx.task_idx)
        staging = temp_staging("raydata")
        try:
            writer = BinaryWriter(staging, rank=rank, **self.options)
            publisher = Publisher(self.output)
            number = published = 0
            for block in blocks:
                for row in BlockAccessor.for_block(block).iter_rows(public_row_format=True):
                    written = writer.add_item(number, _sample(row))
                    number += 1
                    if written is not None:
                        publisher.put_file(written)
                        published += 1
            index = writer.finish()
            for chunk in index.chunks[published:]:  # the ones finish() wrote (the others are being published)
                publisher.put_file(staging / chunk.filename)
            publisher.close()
            return {"rank": rank, "index": index.to_json()}
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def on_write_complete(self, write_result: Any) -> None:
        returns = sorted((r for r in write_result.write_returns if r["index"] is not None), key=lambda r: r["rank"])
        source = self.output.url_for(INDEX_FILENAME)
        parts = [parse_index(r["index"], f"{source} (write task {r['rank']})") for r in returns]
        index = merge_indexes(parts, source, LAYOUT_HINT)
        self.output.write_json(INDEX_FILENAME, index.to_json())
        named = {c.filename for c in index.chunks}
        self.output.delete_many(
            [key for key in self.output.all_keys() if parse_chunk_name(key) is not None and key not in named]
        )
