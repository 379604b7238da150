"""One rank of a soak job (``python tests/scripts/soak_rank.py SPEC_JSON``), run by :mod:`tests.support.soak`.

The rank learns where it sits from its environment only (the soak's "env" job: ``RANK`` /
``WORLD_SIZE`` as torchrun sets them, or ``GLOBAL_RANK`` / ``NNODES``), or from torch.distributed
(the "gloo" job), and streams ``epochs`` epochs of the soak's bucket through a
:class:`StreamingDataLoader` with DataLoader workers. It writes one JSON line per batch to its
events file (flushed at once: the rank may be SIGKILLed any time):

- ``{"e": epoch, "b": batch number in the pass, "ids": [...], "wait": seconds inside next()}``;
- ``{"checkpoint": [epoch, batch]}`` once its loader's state dict is saved (mid-epoch), after which
  the rank holds until the soak writes its release file (the soak kills a worker or the rank then);
- ``{"stall_warning": text}`` for each LoaderStallWarning the loader's watchdog raised;
- ``{"done": true}`` after its last epoch.

Each DataLoader worker writes its pid into ``pids/`` so the soak can signal it.
"""

from __future__ import annotations

import datetime as dt
import faulthandler
import functools
import json
import os
import pickle
import sys
import time
import warnings
from pathlib import Path
from typing import Any


def record_pid(folder: str, name: str, worker_id: int) -> None:
    """worker_init_fn: say which process is worker ``worker_id`` of this rank."""
    path = Path(folder) / f"{name}-w{worker_id}.pid"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(str(os.getpid()))
    tmp.replace(path)


class _Events:
    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, record: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(record) + "\n").encode())  # one write: whole lines only


def _save(state: dict[str, Any], path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as handle:
        pickle.dump(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    # A hung rank prints every thread's stack and exits: the soak then fails naming it, never hangs.
    faulthandler.dump_traceback_later(spec["deadline_s"], exit=True)
    import torch.distributed as dist

    from litdata_stream import LoaderStallWarning, StreamingDataLoader, StreamingDataset

    events = _Events(Path(spec["events"]))
    shown = warnings.showwarning

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, LoaderStallWarning):
            events.write({"stall_warning": str(message)})
        shown(message, category, *args, **kwargs)

    warnings.showwarning = show
    warnings.simplefilter("always", LoaderStallWarning)
    warnings.filterwarnings("ignore", message=".*drop_last.*")  # drop_last=False under DDP warns, by design
    gloo = spec["gloo"]
    if gloo:
        dist.init_process_group("gloo", timeout=dt.timedelta(seconds=spec["deadline_s"]))
    dataset = StreamingDataset(
        spec["url"],
        cache_dir=spec["cache"],
        storage_options=spec["storage_options"],
        shuffle=True,
        drop_last=False,
        max_cache_size=spec["max_cache_size"],
        max_pre_download=spec["max_pre_download"],
    )
    options: dict[str, Any] = {}
    if spec["context"]:
        options["multiprocessing_context"] = spec["context"]
    loader = StreamingDataLoader(
        dataset,
        batch_size=spec["batch_size"],
        num_workers=spec["workers"],
        watchdog_s=spec["watchdog_s"],
        worker_init_fn=functools.partial(record_pid, spec["pids"], spec["name"]),
        **options,
    )
    if spec["load"]:
        with open(spec["load"], "rb") as handle:
            loader.load_state_dict(pickle.load(handle))
    checkpoint = spec["checkpoint"]  # [epoch, batch] or None
    epochs = spec["epochs"]
    while True:
        waited = time.monotonic()
        for batch_no, batch in enumerate(loader, 1):
            wait = time.monotonic() - waited
            epoch = loader.current_epoch
            events.write({"e": epoch, "b": batch_no, "ids": [int(i) for i in batch["index"]], "wait": round(wait, 3)})
            time.sleep(spec["step_s"])  # the training step
            if checkpoint and [epoch, batch_no] == checkpoint:
                _save(loader.state_dict(), Path(spec["save"]))
                events.write({"checkpoint": checkpoint})
                _hold(Path(spec["release"]), spec["deadline_s"])
            waited = time.monotonic()
        if gloo:
            dist.barrier()  # the epoch ends together on every rank, as a training job's would
        if loader.current_epoch >= epochs:
            break
    events.write({"done": True})
    if gloo:
        dist.destroy_process_group()


def _hold(release: Path, deadline_s: float) -> None:
    limit = time.monotonic() + deadline_s
    while not release.exists():
        if time.monotonic() > limit:
            sys.exit(f"soak rank: not released within {deadline_s} s ({release})")
        time.sleep(0.02)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
