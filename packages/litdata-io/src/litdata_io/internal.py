"""Internal to the litdata packages: what litdata-stream, -raw and -prep need from litdata-io.

Not the user API (that is :mod:`litdata_io`): these helpers (the per-process event loop, fork
detection, the loader's activity board, the instrumentation probe, temporary files held alive by
their owner) change with the packages that use them, which pin litdata-io exactly (see
:mod:`litdata_format.internal`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_io._cache._disk import is_disk_full as is_disk_full
    from litdata_io._cache._disk import resolve_max_cache_size as resolve_max_cache_size
    from litdata_io._cache._locks import check_own_folders as check_own_folders
    from litdata_io._cache._locks import make_cache_folder as make_cache_folder
    from litdata_io._cache._stall import holder_state as holder_state
    from litdata_io._cache._versions import file_version as file_version
    from litdata_io._instrument._activity import ActivityBoard as ActivityBoard
    from litdata_io._instrument._activity import activity as activity
    from litdata_io._instrument._activity import activity_begin as activity_begin
    from litdata_io._instrument._activity import activity_end as activity_end
    from litdata_io._instrument._activity import attach_activity as attach_activity
    from litdata_io._instrument._probe import Listener as Listener
    from litdata_io._instrument._probe import Token as Token
    from litdata_io._instrument._probe import probe as probe
    from litdata_io._owned import lifetime_locks as lifetime_locks
    from litdata_io._owned import owned_file as owned_file
    from litdata_io._owned import record_lock as record_lock
    from litdata_io._owned import sweep_orphans as sweep_orphans
    from litdata_io._processes._forkserver import forkserver_running as forkserver_running
    from litdata_io._processes._loop import run_sync as run_sync
    from litdata_io._processes._process import PerProcess as PerProcess
    from litdata_io._processes._process import declare_worker as declare_worker
    from litdata_io._processes._process import fork_generation as fork_generation
    from litdata_io._processes._process import freeze_inherited as freeze_inherited
    from litdata_io._storage._local import LocalStorage as LocalStorage

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
