"""litdata-io: storage layer (resolver, object stores, chunk cache, prefetch).

Resolve a dataset location (:func:`resolve_dir`, :class:`Dir`), open a :class:`Storage` for it
(:func:`get_storage`: local folders, s3/r2/gs/azure/http through obstore, hf:// and any fsspec
filesystem), and find its local cache folder (:func:`cache_dir_for`). Importing this package
imports no backend SDK and no torch.
"""

from litdata_io._cache import (
    CacheClearResult,
    ChunkCache,
    ChunkDownloadError,
    cache_path,
    clear_cache,
    resolve_max_cache_size,
)
from litdata_io._errors import ReadOnlyStorageError, StorageError
from litdata_io._loop import run_sync
from litdata_io._prefetch import Prefetcher, async_prefetch_enabled, download_concurrency, min_pre_download
from litdata_io._registry import get_storage, register_storage, registered_schemes
from litdata_io._resolver import Dir, cache_dir_for, cache_root, expand_time_template, resolve_dir
from litdata_io._secret import Secret
from litdata_io._settings import IOSettings
from litdata_io._storage import ObjectInfo, Storage
from litdata_io._tracer import (
    TRACE_CATEGORIES,
    TRACE_LEVELS,
    TracerConfig,
    TraceSpan,
    enable_tracer,
    trace_begin,
    trace_counter,
    trace_crash,
    trace_enabled,
    trace_end,
    trace_instant,
    trace_span,
    traced,
    tracer_config,
)

__version__ = "0.1.0"

__all__ = [
    "CacheClearResult",
    "ChunkCache",
    "ChunkDownloadError",
    "Dir",
    "IOSettings",
    "ObjectInfo",
    "Prefetcher",
    "ReadOnlyStorageError",
    "Secret",
    "Storage",
    "StorageError",
    "TRACE_CATEGORIES",
    "TRACE_LEVELS",
    "TraceSpan",
    "TracerConfig",
    "__version__",
    "async_prefetch_enabled",
    "cache_dir_for",
    "cache_path",
    "cache_root",
    "clear_cache",
    "download_concurrency",
    "enable_tracer",
    "expand_time_template",
    "get_storage",
    "min_pre_download",
    "register_storage",
    "registered_schemes",
    "resolve_dir",
    "resolve_max_cache_size",
    "run_sync",
    "trace_begin",
    "trace_counter",
    "trace_crash",
    "trace_enabled",
    "trace_end",
    "trace_instant",
    "trace_span",
    "traced",
    "tracer_config",
]
