"""litdata-raw: stream existing files (images, audio, JSONL, any bytes) with no conversion.

:class:`StreamingRawDataset` is a map-style torch dataset over a local folder or a bucket: the
listing is cached as ``index.json.zstd`` (:class:`FileIndexer`), and each batch's files are
downloaded concurrently on an asyncio loop.
"""

from litdata_raw._dataset import StreamingRawDataset
from litdata_raw._index import BaseIndexer, FileIndexer, FileMetadata

__version__ = "0.1.0"

__all__ = ["BaseIndexer", "FileIndexer", "FileMetadata", "StreamingRawDataset", "__version__"]
