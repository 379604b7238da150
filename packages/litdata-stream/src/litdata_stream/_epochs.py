"""Which epoch a pass over a dataset reads: one record per dataset.

The record is shared by the process that made the dataset and by every DataLoader worker holding a
copy of it.

A *pass* is one iteration over the dataset: a ``for`` loop over it, a DataLoader epoch (whose
workers each read a share of the same pass), or a ``StreamingDataLoader`` epoch. The rules:

- A pass reads the record's epoch. A pass that runs to its end moves the record to the next
  epoch: in a plain DataLoader when the last of its workers reaches the end of its share; in a
  StreamingDataLoader when the loader delivered the last batch (its workers are ahead of it).
- A pass that begins while another was broken off reads the next epoch, so every pass gets a new
  order, as a shuffling torch ``DataLoader`` would.
- ``set_epoch(n)`` (or a loaded state dict) makes the next pass read epoch ``n``.

Why a file. A torch DataLoader copies the dataset into fresh worker processes every epoch (forked
or pickled) and never tells the parent's copy that an epoch went by: only memory shared with the
workers lets the parent, and the next epoch's workers, know. The record is 24 bytes in a temporary
file (``epoch``, the pass that holds it, how many of that pass's workers finished), read and
written under a lock on those bytes; the process that made the dataset removes it when the dataset
goes and holds it alive until then (``litdata_io.internal.owned_file``: the record of a process
killed with SIGKILL is deleted by the next process that makes one in the same ``TMPDIR``). Each
worker tells which pass it belongs to by a token: the one its StreamingDataLoader chose, or else
the seed torch gives the workers of one DataLoader iteration, and, for a persistent worker, how
many passes it has made.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from torch.utils.data import get_worker_info

from litdata_io.internal import owned_file, record_lock

__all__ = ["Epochs", "EpochsOwner", "LoaderPass", "Pass", "new_token", "worker_token"]

_RECORD = struct.Struct("<qqq")  # epoch, token of the pass holding it (0: none yet), workers finished


def new_token() -> int:
    """A token for a new pass (never 0)."""
    return int.from_bytes(os.urandom(8), "little") >> 1 | 1


def worker_token(source: int, passes: int) -> int:
    """The token of a DataLoader worker's ``passes``-th pass of the iteration ``source`` names."""
    digest = hashlib.blake2b(f"{source}:{passes}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1 | 1


@dataclass(frozen=True)
class LoaderPass:
    """What a StreamingDataLoader hands its workers with the dataset.

    The token of its pass, and how to batch (None: torch batches, sample by sample).
    """

    token: int
    batching: Any = None


@dataclass(frozen=True)
class Pass:
    """One process's part of a pass.

    The epoch it reads, its token, and how many parts finish it (0: not this process's to finish).
    """

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
        state.pop("_remover")  # only the process that made the record removes it
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
        """Begin this process's part of a pass, or join the pass ``token`` names.

        In the main process ``token`` is the pass to join (None: a new one). In a DataLoader worker
        it is the StreamingDataLoader's token for its workers (None: a plain DataLoader, named by
        the seed torch gives the workers of one iteration); a persistent worker's later passes
        derive new tokens from it, as its loader does.
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


class EpochsOwner:
    """What a dataset that owns its epochs has: ``current_epoch``, ``set_epoch``, and ``__iter__``.

    ``__iter__`` is one pass (its ``_iterate``), joining the pass a StreamingDataLoader handed it
    (``hand_pass``).
    """

    _epochs: Epochs
    _resume: dict[str, Any] | None  # where a pass of the loaded state's epoch continues from
    # Set by a StreamingDataLoader while it starts its workers, so that they join its pass.
    _loader_pass: LoaderPass | None = None
    # Whether ``__iter__`` makes the batches itself when handed a pass with a batching (see
    # ``_protocol.LoaderDataset``): a subclass that defines its own ``__iter__`` yields samples,
    # which the DataLoader then batches. Such a subclass may declare it True itself.
    batches_in_workers: ClassVar[bool] = True
    # Whether ``iter(dataset)`` has ``len()`` (upstream's StreamingDataset returns itself from
    # ``__iter__``, so ``len(iter(ds))`` is its length; its Combined and Parallel datasets do not).
    sized_passes: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__iter__" in vars(cls) and "batches_in_workers" not in vars(cls):
            cls.batches_in_workers = False

    @property
    def epochs(self) -> Epochs:
        """The record of which epoch a pass reads (a StreamingDataLoader begins and finishes its passes on it)."""
        return self._epochs

    @property
    def current_epoch(self) -> int:
        """The epoch of the pass in progress, or else of the next pass."""
        return self._epochs.current

    @current_epoch.setter
    def current_epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def set_epoch(self, current_epoch: int) -> None:
        """Make the next pass read epoch ``current_epoch``.

        Ignored while a loaded state dict waits for its pass (as upstream does): a training loop
        that calls ``set_epoch`` before every epoch still resumes where the state dict says.

        Args:
            current_epoch: The epoch the next pass reads (its shuffled order depends on it).
        """
        resume = self._resume
        if resume is not None and self._epochs.pending == resume["epoch"]:
            return
        self.reset_to_epoch(int(current_epoch))

    def reset_to_epoch(self, epoch: int) -> None:
        """The next pass reads ``epoch`` from its start, whatever state dict was loaded.

        Args:
            epoch: The epoch the next pass reads, from its first sample.
        """
        self._resume = None
        self._epochs.set(epoch)

    def hand_pass(self, handed: LoaderPass | None) -> None:
        """Make the next ``iter()`` of this dataset join a StreamingDataLoader's pass ``handed``.

        The ``iter()`` is here, or in a DataLoader worker taking its copy now; ``handed`` is None when that
        pass is over.

        Args:
            handed: The loader's pass (its token, and how its workers batch), or None when it is over.
        """
        if handed is None:
            self.__dict__.pop("_loader_pass", None)
        else:
            self._loader_pass = handed

    def __iter__(self) -> Iterator[Any]:
        handed = self._loader_pass
        if handed is None:
            if self.sized_passes:
                return SizedPass(self, self._iterate(None, None))
            return self._iterate(None, None)
        return self._iterate(handed.token, handed.batching)

    def _iterate(self, token: int | None, batching: Any) -> Iterator[Any]:
        raise NotImplementedError


class SizedPass(Iterator[Any]):
    """A pass over a dataset that also answers ``len()``: the dataset's length, as upstream's does.

    Closing it (or dropping it) closes the pass, as it would the bare generator.
    """

    __slots__ = ("_dataset", "_samples")

    def __init__(self, dataset: Any, samples: Iterator[Any]) -> None:
        self._dataset = dataset
        self._samples = samples

    def __iter__(self) -> SizedPass:
        return self

    def __next__(self) -> Any:
        return next(self._samples)

    def __len__(self) -> int:
        return len(self._dataset)

    def close(self) -> None:
        """Break the pass off here (what ``del`` or the end of a ``for`` with ``break`` does too)."""
        close = getattr(self._samples, "close", None)
        if close is not None:
            close()


def _remove(path: str, owner: int, fd: int) -> None:
    if os.getpid() == owner:  # a forked worker inherits this finalizer: it must not remove the file
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.close(fd)  # after the unlink: a sweep never sees the record unlocked
