"""``Cache``: the low-level writer and reader of an optimized dataset, usable inside DataLoader workers.

Each process writes its own chunks through a :class:`~litdata_format.BinaryWriter` made on its
first sample; ``done()`` (run by a worker as it exits) writes its ``{rank}.index.json``, and
``merge(num_workers)`` merges them into ``index.json``. Then ``cache[i]`` reads the ``i``-th sample.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from multiprocessing import util
from pathlib import Path
from typing import Any

from litdata_format import INDEX_FILENAME, BaseItemLoader, BinaryWriter, DatasetReader, Serializer, TokensLoader
from litdata_format.internal import check_writer_options
from litdata_io import Dir, resolve_dir
from litdata_stream._env import DistributedEnv, WorkerEnv

__all__ = ["Cache"]


class Cache:
    """Write samples into chunks and read them back.

    Args:
        input_dir: the local folder of the chunks (a path, or a ``Dir`` whose ``path`` is used).
        compression: ``None``, ``"zstd"`` or ``"zstd:N"``: compress every chunk file.
        encryption: an :class:`~litdata_format.Encryption` for writing and reading.
        chunk_size: the most items per chunk (tokens with ``TokensLoader``).
        chunk_bytes: the most bytes per chunk (an int or a string like ``"64MB"``).
        item_loader: how items are laid out (``TokensLoader(block_size)`` for token streams).
        serializers: extra serializers by key, tried before the built-in ones.
        writer_chunk_index: the number of the first chunk this process writes.
        compression_level: with ``compression``, what one zstd frame holds: ``"chunk"`` (the whole
            file, the default), ``"batch"`` (runs of items) or ``"sample"``, as for
            :class:`~litdata_format.BinaryWriter`.
        compression_batch_size: items per frame with ``"batch"``.
    """

    def __init__(
        self,
        input_dir: str | os.PathLike[str] | Dir | None,
        compression: str | None = None,
        encryption: Any = None,
        chunk_size: int | None = None,
        chunk_bytes: int | str | None = None,
        item_loader: BaseItemLoader | None = None,
        serializers: Mapping[str, Serializer] | None = None,
        writer_chunk_index: int | None = None,
        compression_level: str | None = None,
        compression_batch_size: int | None = None,
    ) -> None:
        resolved = resolve_dir(input_dir)
        if resolved.path is None:
            raise ValueError(
                f"Cache writes to and reads from a local folder; {input_dir!r} has none "
                "(give a path, or Dir(path=..., url=...))"
            )
        check_writer_options(  # the writer's own check, before any sample
            chunk_size, chunk_bytes, compression, encryption, item_loader, compression_level, compression_batch_size
        )
        self._cache_dir = resolved.path
        self._writer_options: dict[str, Any] = {
            "chunk_size": chunk_size,
            "chunk_bytes": chunk_bytes,
            "compression": compression,
            "encryption": encryption,
            "serializers": serializers,
            "chunk_index": writer_chunk_index or 0,
            "compression_level": compression_level,
            "compression_batch_size": compression_batch_size,
        }
        self._item_loader = item_loader
        self._serializers = serializers
        self._encryption = encryption
        self._distributed_env = DistributedEnv.detect()
        self._rank: int | None = None
        self._writer: BinaryWriter | None = None
        self._written: list[str] | None = None
        self._reader: DatasetReader | None = None

    def __getstate__(self) -> dict[str, Any]:
        # A copy sent to a DataLoader worker writes and reads on its own.
        state = self.__dict__.copy()
        state.update(_rank=None, _writer=None, _written=None, _reader=None)
        return state

    @property
    def cache_dir(self) -> str:
        """The folder of the chunks."""
        return self._cache_dir

    @property
    def checkpoint_dir(self) -> str:
        """A ``checkpoints`` folder inside the cache folder (created on first use)."""
        path = os.path.join(self._cache_dir, "checkpoints")
        os.makedirs(path, exist_ok=True)
        return path

    @property
    def rank(self) -> int:
        """This writer's number: global rank x DataLoader workers + worker id."""
        if self._rank is None:
            worker = WorkerEnv.detect()
            self._rank = self._distributed_env.global_rank * worker.world_size + worker.rank
        return self._rank

    @property
    def filled(self) -> bool:
        """Whether the dataset is complete (``index.json`` exists)."""
        return (Path(self._cache_dir) / INDEX_FILENAME).is_file()

    # -- writing --------------------------------------------------------------------------------
    def _get_writer(self) -> BinaryWriter:
        writer = self._writer
        if writer is None:
            writer = self._writer = BinaryWriter(
                self._cache_dir,
                item_loader=copy.deepcopy(self._item_loader) if self._item_loader is not None else None,
                rank=self.rank,
                **self._writer_options,
            )
            if _in_worker():
                # A DataLoader worker cannot be told when the epoch ends: it writes its index as it exits.
                util.Finalize(self, self.done, exitpriority=10)
        return writer

    def __setitem__(self, index: int, data: Any) -> None:
        """Store sample ``data`` at position ``index``."""
        self._get_writer().add_item(index, data)

    def _add_item(self, index: int, data: Any) -> str | None:
        """Store a sample; return the path of the chunk it completed, if one was written."""
        return self._get_writer().add_item(index, data)

    def done(self) -> list[str] | None:
        """Write the last chunk and this process's ``{rank}.index.json``; return the chunk paths."""
        if self._written is None and self._writer is not None:
            self._written = self._writer.done()
        return self._written

    def merge(self, num_workers: int = 1, node_rank: int | None = None) -> None:
        """Wait for ``num_workers`` rank indexes and merge them into ``index.json``.

        ``node_rank`` is accepted for compatibility; every process merging sees the same files.

        Args:
            num_workers: How many rank indexes to wait for: the processes that wrote into this cache.
            node_rank: Ignored; accepted for compatibility with upstream LitData.
        """
        self.done()
        if self._writer is not None:
            self._writer.merge(num_workers)
        else:
            BinaryWriter(self._cache_dir, chunk_size=1).merge(num_workers)
        self._reader = None

    # -- reading --------------------------------------------------------------------------------
    def _get_reader(self) -> DatasetReader:
        reader = self._reader
        if reader is None:
            if not self.filled:
                raise ValueError(
                    f"the cache at {self._cache_dir} is not complete (no {INDEX_FILENAME}): write the samples, "
                    "then call done() and merge()"
                )
            loader = copy.deepcopy(self._item_loader) if self._item_loader is not None else None
            reader = DatasetReader(self._cache_dir, loader, self._serializers, self._encryption)
            if reader.index.item_loader == "TokensLoader" and not isinstance(loader, TokensLoader):
                raise ValueError(
                    f"the dataset at {self._cache_dir} was written with TokensLoader: read it with "
                    "Cache(..., item_loader=TokensLoader(block_size=...))"
                )
            self._reader = reader
        return reader

    def __getitem__(self, index: int) -> Any:
        """The sample at position ``index`` of the merged dataset."""
        return self._get_reader()[int(index)]

    def __len__(self) -> int:
        return len(self._get_reader())

    def get_chunk_intervals(self) -> list[tuple[int, int, int, int]]:
        """Each chunk's samples as ``(start, start, end, end)`` positions (upstream's interval shape)."""
        reader = self._get_reader()
        out = []
        position = 0
        for info in reader.index.chunks:
            count = reader.item_loader.items_in_chunk(info)
            out.append((position, position, position + count, position + count))
            position += count
        return out


def _in_worker() -> bool:
    from torch.utils.data import get_worker_info

    return get_worker_info() is not None
