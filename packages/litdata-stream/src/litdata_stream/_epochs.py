"""Which epoch a pass over a dataset reads: one record per dataset, shared with its DataLoader workers.

A *pass* is one iteration over the dataset: a ``for`` loop, a DataLoader epoch (whose workers each
read a share of the same pass), or a ``StreamingDataLoader`` epoch. The rules:

- A pass reads the record's epoch. A pass that runs to its end moves the record to the next
  epoch: in a plain DataLoader when the last of its workers reaches the end of its share; in a
  StreamingDataLoader when the loader delivered the last batch (its workers are ahead of it).
- A pass that begins while another was broken off reads the next epoch, so every pass gets a new
  order, as a shuffling torch ``DataLoader`` would.
- ``set_epoch(n)`` (or a loaded state dict) makes the next pass read epoch ``n``.

Why a file: a torch DataLoader copies the dataset into fresh workers every epoch and never tells
the parent's copy that an epoch went by. The record is 24 bytes in a temporary file (``epoch``, the
pass holding it, how many of its workers finished), read and written under a lock; the process that
made the dataset owns it (``litdata_io.internal.owned_file``). A worker tells which pass it belongs
to by a token: its StreamingDataLoader's, or else the seed torch gives the workers of one iteration
(and, for a persistent worker, how many passes it has made).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import weakref
from dataclasses import dataclass
from typing import Any

from torch.utils.data import get_worker_info

from litdata_io.internal import owned_file, record_lock

__all__ = ["Epochs", "Pass", "new_token", "worker_token"]

_RECORD = struct.Struct("<qqq")  # epoch, token of the pass holding it (0: none yet), workers finished


def new_token() -> int:
    """A token for a new pass (never 0)."""
    return int.from_bytes(os.urandom(8), "little") >> 1 | 1


def worker_token(source: int, passes: int) -> int:
    """The token of a DataLoader worker's ``passes``-th pass of the iteration ``source`` names."""
    digest = hashlib.blake2b(f"{source}:{passes}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1 | 1


@dataclass(frozen=True)
class Pass:
    """One process's part of a pass: its epoch, its token, and how many parts finish it (0: not ours to)."""

    epoch: int
    token: int
    parts: int


class Epochs:
    """The epoch record of one dataset (see the module docstring)."""

    def __init__(self, epoch: int = 1) -> None:
        # The descriptor holds the record alive (see owned_file) until the dataset goes.
        fd, self.path = owned_file("litdata-epoch-")
        try:
            os.pwrite(fd, _RECORD.pack(int(epoch), 0, 0), 0)
        except BaseException:
            _remove(self.path, os.getpid(), fd)
            raise
        self._local = (int(epoch), 0, 0)  # used where the file is gone (a copy outliving its maker)
        self._passes = (os.getpid(), 0)  # passes this worker process made (a persistent worker counts)
        self._remover = weakref.finalize(self, _remove, self.path, os.getpid(), fd)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        # Only the process that made the record removes it; a copy (unpickled, e.g. in a spawned
        # process that starts workers of its own) has no remover and pickles again.
        state.pop("_remover", None)
        return state

    def _update(self, change: Any) -> tuple[int, int, int]:
        """Apply ``change`` (old record -> new record) under the lock; return the new record."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            new = change(self._local)
        else:
            try:
                with record_lock(fd, _RECORD.size):
                    old = _RECORD.unpack(os.pread(fd, _RECORD.size, 0))
                    new = change(old)
                    if new != old:
                        os.pwrite(fd, _RECORD.pack(*new), 0)
            finally:
                os.close(fd)
        self._local = new
        return new

    @property
    def current(self) -> int:
        """The epoch of the pass in progress, or else of the next pass."""
        return self._update(lambda record: record)[0]

    @property
    def pending(self) -> int | None:
        """The epoch the next pass reads if no pass has begun on it yet, else None."""
        epoch, holder, _ = self._update(lambda record: record)
        return epoch if holder == 0 else None

    def set(self, epoch: int) -> None:
        """The next pass reads ``epoch``."""
        self._update(lambda record: (int(epoch), 0, 0))

    def begin(self, token: int | None = None) -> Pass:
        """Begin this process's part of a pass, or join the pass ``token`` names (None: a new one).

        In a DataLoader worker ``token`` is its StreamingDataLoader's (None: a plain DataLoader's, named
        by torch's seed); a persistent worker's later passes derive new tokens from it.
        """
        info = get_worker_info()
        if info is None:
            token, parts = (token or new_token()), 1
        else:
            pid, made = self._passes
            made = made if pid == os.getpid() else 0  # a fresh worker has made none
            self._passes = (os.getpid(), made + 1)
            # A StreamingDataLoader's workers run ahead of what it delivered: it finishes the pass.
            parts = 0 if token else info.num_workers
            token = worker_token(token or info.seed - info.id, made)

        def claim(record: tuple[int, int, int]) -> tuple[int, int, int]:
            epoch, holder, _ = record
            if holder == token:
                return record
            if holder == 0:
                return (epoch, token, 0)
            return (epoch + 1, token, 0)  # the pass holding it was broken off: a new epoch

        return Pass(self._update(claim)[0], token, parts)

    def finish(self, run: Pass) -> None:
        """This process's part of ``run`` reached its end; the last part moves to the next epoch."""

        def done(record: tuple[int, int, int]) -> tuple[int, int, int]:
            epoch, holder, finished = record
            if holder != run.token or not run.parts:
                return record
            if finished + 1 >= run.parts:
                return (epoch + 1, 0, 0)
            return (epoch, holder, finished + 1)

        self._update(done)


def _remove(path: str, owner: int, fd: int) -> None:
    if os.getpid() == owner:  # a forked worker inherits this finalizer: it must not remove the file
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.close(fd)  # after the unlink: a sweep never sees the record unlocked
