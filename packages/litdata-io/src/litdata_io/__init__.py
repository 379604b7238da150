"""litdata-io: storage layer (resolver, object stores, chunk cache, prefetch).

Resolve a dataset location (:func:`resolve_dir`, :class:`Dir`), open a :class:`Storage` for it
(:func:`get_storage`: local folders, s3/r2/gs/azure/http through obstore, hf:// and any fsspec
filesystem), and find its local cache folder (:func:`cache_dir_for`). Importing this package
imports no backend SDK and no torch; names load their module on first use (PEP 562), so a
process that needs only the resolver or the tracer (an optimize worker writing locally) does not
import asyncio, the cache or the prefetcher. This module is the user API; what the other litdata
packages need beyond it is in :mod:`litdata_io.internal`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

__version__ = "0.2.1000"

if TYPE_CHECKING:
    from litdata_io._cache._chunk_cache import ChunkCache as ChunkCache
    from litdata_io._cache._chunk_cache import ChunkDownloadError as ChunkDownloadError
    from litdata_io._cache._clear import CacheClearResult as CacheClearResult
    from litdata_io._cache._clear import cache_path as cache_path
    from litdata_io._cache._clear import clear_cache as clear_cache
    from litdata_io._cache._prefetch import Prefetcher as Prefetcher
    from litdata_io._cache._versions import claim_version as claim_version
    from litdata_io._cache._versions import dataset_version as dataset_version
    from litdata_io._instrument._tracer import TracerConfig as TracerConfig
    from litdata_io._instrument._tracer import TraceSpan as TraceSpan
    from litdata_io._instrument._tracer import enable_tracer as enable_tracer
    from litdata_io._instrument._tracer import trace_begin as trace_begin
    from litdata_io._instrument._tracer import trace_counter as trace_counter
    from litdata_io._instrument._tracer import trace_crash as trace_crash
    from litdata_io._instrument._tracer import trace_enabled as trace_enabled
    from litdata_io._instrument._tracer import trace_end as trace_end
    from litdata_io._instrument._tracer import trace_instant as trace_instant
    from litdata_io._instrument._tracer import trace_span as trace_span
    from litdata_io._instrument._tracer import tracer_config as tracer_config
    from litdata_io._mounts import register_mount as register_mount
    from litdata_io._processes._forkserver import start_forkserver as start_forkserver
    from litdata_io._resolver import Dir as Dir
    from litdata_io._resolver import cache_dir_for as cache_dir_for
    from litdata_io._resolver import cache_root as cache_root
    from litdata_io._resolver import resolve_dir as resolve_dir
    from litdata_io._storage._failures import ReadOnlyStorageError as ReadOnlyStorageError
    from litdata_io._storage._failures import StorageError as StorageError
    from litdata_io._storage._interface import ObjectInfo as ObjectInfo
    from litdata_io._storage._interface import Storage as Storage
    from litdata_io._storage._schemes import get_storage as get_storage
    from litdata_io._storage._schemes import register_storage as register_storage
    from litdata_io._storage._schemes import registered_schemes as registered_schemes

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
