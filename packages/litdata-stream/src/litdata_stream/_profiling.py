"""Profiling a StreamingDataLoader: a viztracer trace or cProfile stats of DataLoader worker 0.

Nothing of torch's worker loop is patched: worker 0 starts its profiler from the loader's wrapped
``worker_init_fn`` and counts batches by the probe's ``worker_batch`` events. It saves when the
requested batches are done or when the worker exits. Only global rank 0 profiles. The main
process's cProfile starts after the workers, so no worker inherits an active profiler.
"""

from __future__ import annotations

import contextlib
import cProfile
import os
import pstats
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing import util
from typing import Any

from litdata_io.internal import probe

__all__ = [
    "CPROFILE_MAIN",
    "CPROFILE_WORKER",
    "TRACE_FILE",
    "ProfileSettings",
    "ProfiledCollate",
    "ProfiledWorkerInit",
    "main_profiler",
    "profile_settings",
]

TRACE_FILE = "result.json"
CPROFILE_MAIN = "cprofile_main"
CPROFILE_WORKER = "cprofile_worker0"
_INSTALL = 'pip install "litdata-stream[profile]"  (or: pip install viztracer)'


@dataclass(frozen=True)
class ProfileSettings:
    """What to profile: ``kind`` ``"viztracer"`` (worker 0) or ``"cprofile"`` (main and worker 0).

    ``batches``: how many worker 0 traces (None: its whole life) after ``skip``; ``here``: this process
    profiles (global rank 0 only).
    """

    kind: str
    batches: int | None
    skip: int
    directory: str
    here: bool


def profile_settings(
    profile_batches: bool | int,
    profile_skip_batches: int,
    profile_dir: str | os.PathLike[str] | None,
    profile_cprofile: bool,
    num_workers: int,
    global_rank: int,
) -> ProfileSettings | None:
    """Check the loader's profiling arguments; None when profiling is off."""
    if isinstance(profile_batches, bool):
        batches: int | None = None if profile_batches else 0
    elif isinstance(profile_batches, int) and profile_batches >= 0:
        batches = profile_batches
    else:
        raise ValueError(f"profile_batches must be a bool or a non-negative int, got {profile_batches!r}")
    tracing = profile_batches is True or bool(batches)
    if not isinstance(profile_skip_batches, int) or isinstance(profile_skip_batches, bool) or profile_skip_batches < 0:
        raise ValueError(f"profile_skip_batches must be a non-negative int, got {profile_skip_batches!r}")
    if tracing and profile_cprofile:
        raise ValueError(
            "profile_batches (viztracer) and profile_cprofile both install a profiler (sys.setprofile); "
            "enable only one of them"
        )
    if tracing and num_workers < 1:
        raise ValueError(
            "profile_batches traces DataLoader worker 0, so it needs num_workers >= 1 (Profiling is supported only "
            "with num_workers >= 1; use profile_cprofile=True to profile a num_workers=0 loader)"
        )
    if tracing:
        try:
            import viztracer  # noqa: F401
        except ImportError:
            raise ModuleNotFoundError(f"profile_batches needs viztracer: {_INSTALL}") from None
    if not tracing and not profile_cprofile:
        return None
    directory = os.path.abspath(os.fspath(profile_dir) if profile_dir is not None else os.getcwd())
    os.makedirs(directory, exist_ok=True)
    return ProfileSettings(
        kind="viztracer" if tracing else "cprofile",
        batches=batches,
        skip=profile_skip_batches if tracing else 0,
        directory=directory,
        here=global_rank == 0,
    )


def dump_cprofile(profiler: cProfile.Profile, stem: str) -> None:
    """Write ``{stem}.prof`` (for ``python -m pstats`` or snakeviz) and a ``{stem}.txt`` summary."""
    profiler.disable()
    profiler.dump_stats(f"{stem}.prof")
    with open(f"{stem}.txt", "w", encoding="utf-8") as handle:
        handle.write("Self time (tottime) says where the CPU went; cumtime also counts waits and callees.\n\n")
        stats = pstats.Stats(profiler, stream=handle).strip_dirs()
        handle.write("--- by tottime ---\n")
        stats.sort_stats("tottime").print_stats(40)
        handle.write("--- by cumtime ---\n")
        stats.sort_stats("cumtime").print_stats(40)


class _WorkerProfiler:
    """Worker 0's profiler, started by ``ProfiledWorkerInit`` and advanced by the probe's ``worker_batch`` events."""

    def __init__(self, settings: ProfileSettings) -> None:
        self.settings = settings
        self.batches_done = 0
        self._tracer: Any = None
        self._cprofile: cProfile.Profile | None = None
        self._finished = False

    def start(self) -> None:
        if self.settings.kind == "cprofile":
            self._cprofile = cProfile.Profile()
            self._cprofile.enable()
        elif self.settings.skip == 0:
            self._start_trace()
        # Saved when the loader shuts the worker down, unless a batch count ends it earlier.
        util.Finalize(None, self.finish, exitpriority=100)

    def _start_trace(self) -> None:
        from viztracer import VizTracer

        path = os.path.join(self.settings.directory, TRACE_FILE)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # a trace from an earlier run would be mistaken for this one
        self._tracer = VizTracer(output_file=path, verbose=0, register_global=False)
        self._tracer.start()

    def event(self, name: str, phase: str, args: Mapping[str, object]) -> None:
        """A probe event (``litdata_io.internal.Listener``): a ``worker_batch`` advances the batch count."""
        if name != "worker_batch" or self._finished or self.settings.kind != "viztracer":
            return
        self.batches_done += 1
        if self._tracer is None and self.batches_done == self.settings.skip:
            self._start_trace()
        elif self.settings.batches is not None and self.batches_done >= self.settings.skip + self.settings.batches:
            self.finish()

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        probe.unlisten(self)
        if self._cprofile is not None:
            dump_cprofile(self._cprofile, os.path.join(self.settings.directory, CPROFILE_WORKER))
            print(f"[litdata] cProfile of worker 0 saved to {self.settings.directory}", flush=True)
        if self._tracer is not None:
            self._tracer.stop()
            path = os.path.join(self.settings.directory, TRACE_FILE)
            self._tracer.save(path)
            print(f"[litdata] trace of worker 0 saved to {path} (open it in chrome://tracing or Perfetto)", flush=True)


_active: _WorkerProfiler | None = None


class ProfiledWorkerInit:
    """The loader's ``worker_init_fn``: starts worker 0's profiler, then calls the user's function."""

    def __init__(self, settings: ProfileSettings, user_init: Callable[[int], Any] | None) -> None:
        self.settings = settings
        self.user_init = user_init

    def __call__(self, worker_id: int) -> None:
        global _active
        if worker_id == 0 and self.settings.here:
            _active = _WorkerProfiler(self.settings)
            _active.start()
            probe.listen(_active)
        if self.user_init is not None:
            self.user_init(worker_id)


class ProfiledCollate:
    """The loader's ``collate_fn``: collates, then records a ``worker_batch`` event (worker 0's profiler counts it)."""

    def __init__(self, collate_fn: Callable[[list[Any]], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, batch: list[Any]) -> Any:
        out = self.collate_fn(batch)
        probe.instant("worker_batch", "batch")
        return out


@contextlib.contextmanager
def main_profiler(settings: ProfileSettings | None) -> Iterator[None]:
    """Run cProfile on the main process for the duration (when profiling with cProfile on rank 0)."""
    if settings is None or settings.kind != "cprofile" or not settings.here:
        yield
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        dump_cprofile(profiler, os.path.join(settings.directory, CPROFILE_MAIN))
