"""litdata-io: storage layer (resolver, object stores, chunk cache, prefetch).

Resolve a dataset location (:func:`resolve_dir`, :class:`Dir`), open a :class:`Storage` for it
(:func:`get_storage`: local folders, s3/r2/gs/azure/http through obstore, hf:// and any fsspec
filesystem), and find its local cache folder (:func:`cache_dir_for`). Importing this package
imports no backend SDK and no torch; names load their module on first use (PEP 562), so a
process that needs only the resolver or the tracer (an optimize worker writing locally) does not
import asyncio, the cache or the prefetcher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

# public name -> the submodule that defines it
_EXPORTS: dict[str, str] = {
    "CacheClearResult": "litdata_io._cache_clear",
    "ChunkCache": "litdata_io._cache",
    "ChunkDownloadError": "litdata_io._cache",
    "cache_path": "litdata_io._cache_clear",
    "clear_cache": "litdata_io._cache_clear",
    "resolve_max_cache_size": "litdata_io._cache",
    "claim_version": "litdata_io._cache_versions",
    "dataset_version": "litdata_io._cache_versions",
    "ReadOnlyStorageError": "litdata_io._errors",
    "StorageError": "litdata_io._errors",
    "start_forkserver": "litdata_io._forkserver",
    "fork_generation": "litdata_io._process",
    "run_sync": "litdata_io._loop",
    "Prefetcher": "litdata_io._prefetch",
    "async_prefetch_enabled": "litdata_io._prefetch",
    "download_concurrency": "litdata_io._prefetch",
    "min_pre_download": "litdata_io._prefetch",
    "get_storage": "litdata_io._registry",
    "register_storage": "litdata_io._registry",
    "registered_schemes": "litdata_io._registry",
    "Dir": "litdata_io._resolver",
    "cache_dir_for": "litdata_io._resolver",
    "cache_root": "litdata_io._resolver",
    "expand_time_template": "litdata_io._resolver",
    "resolve_dir": "litdata_io._resolver",
    "Secret": "litdata_io._secret",
    "IOSettings": "litdata_io._settings",
    "ObjectInfo": "litdata_io._storage",
    "Storage": "litdata_io._storage",
    "ActivityBoard": "litdata_io._activity",
    "activity": "litdata_io._activity",
    "activity_begin": "litdata_io._activity",
    "activity_end": "litdata_io._activity",
    "attach_activity": "litdata_io._activity",
    "TRACE_CATEGORIES": "litdata_io._tracer",
    "TRACE_LEVELS": "litdata_io._tracer",
    "TraceSpan": "litdata_io._tracer",
    "TracerConfig": "litdata_io._tracer",
    "enable_tracer": "litdata_io._tracer",
    "trace_begin": "litdata_io._tracer",
    "trace_counter": "litdata_io._tracer",
    "trace_crash": "litdata_io._tracer",
    "trace_enabled": "litdata_io._tracer",
    "trace_end": "litdata_io._tracer",
    "trace_instant": "litdata_io._tracer",
    "trace_span": "litdata_io._tracer",
    "traced": "litdata_io._tracer",
    "tracer_config": "litdata_io._tracer",
}

if TYPE_CHECKING:
    from litdata_io._activity import ActivityBoard, activity, activity_begin, activity_end, attach_activity
    from litdata_io._cache import ChunkCache, ChunkDownloadError, resolve_max_cache_size
    from litdata_io._cache_clear import CacheClearResult, cache_path, clear_cache
    from litdata_io._cache_versions import claim_version, dataset_version
    from litdata_io._errors import ReadOnlyStorageError, StorageError
    from litdata_io._forkserver import start_forkserver
    from litdata_io._loop import run_sync
    from litdata_io._prefetch import Prefetcher, async_prefetch_enabled, download_concurrency, min_pre_download
    from litdata_io._process import fork_generation
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
    "ActivityBoard",
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
    "activity",
    "activity_begin",
    "activity_end",
    "async_prefetch_enabled",
    "attach_activity",
    "cache_dir_for",
    "cache_path",
    "cache_root",
    "claim_version",
    "clear_cache",
    "dataset_version",
    "download_concurrency",
    "enable_tracer",
    "expand_time_template",
    "get_storage",
    "min_pre_download",
    "register_storage",
    "registered_schemes",
    "resolve_dir",
    "resolve_max_cache_size",
    "fork_generation",
    "run_sync",
    "start_forkserver",
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

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)
