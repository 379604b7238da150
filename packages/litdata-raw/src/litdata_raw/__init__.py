"""litdata-raw: stream existing files (images, audio, JSONL, any bytes) with no conversion.

:class:`StreamingRawDataset` is a map-style torch dataset over a local folder or a bucket: the
listing is cached as ``index.json.zstd`` (:class:`FileIndexer`), and each batch's files are
downloaded concurrently on an asyncio loop.
Names load their module on first use (:mod:`litdata_format.lazy`), so ``import litdata_raw`` imports
no torch until a name that needs it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

__version__ = "0.2.1000"

if TYPE_CHECKING:
    from litdata_raw._file_index import BaseIndexer as BaseIndexer
    from litdata_raw._file_index import FileIndexer as FileIndexer
    from litdata_raw._file_index import FileList as FileList
    from litdata_raw._file_index import FileMetadata as FileMetadata
    from litdata_raw._raw_dataset import StreamingRawDataset as StreamingRawDataset

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
