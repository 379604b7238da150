"""``StreamingDataset``: an optimized dataset read chunk by chunk.

It is shuffled, split over ranks and workers, and resumable exactly (see ``_pass_plan`` for the mechanism).
The dataset holds the options, the plan of a pass and its resume point; what reads the chunks
is a reader it hands a ``ReadSpec`` (``_read``), which never sees the dataset.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from torch.utils.data import IterableDataset

from litdata_format import BaseItemLoader, ParquetLoader, Serializer, TokensLoader
from litdata_format.internal import SampleMap, loader_for, normalize_key, parse_size
from litdata_format.serializers import resolve_serializers
from litdata_io import Dir, resolve_dir
from litdata_stream._collate import Batching
from litdata_stream._draws import python_random_state
from litdata_stream._env import DistributedEnv, WorkerEnv, logger, notice_drop_last
from litdata_stream._epochs import Epochs
from litdata_stream._errors import NotCallableError
from litdata_stream._parquet_index import split_file_pattern
from litdata_stream._pass_plan import (
    Interval,
    Topology,
    WorkerPlan,
    batches_left,
    rank_shares,
    rebase_resume,
    skip_samples,
)
from litdata_stream._protocol import EpochsOwner, LoaderPlan, delivered_batches
from litdata_stream._read import ReadSpec, ReadState, StreamingReader
from litdata_stream._sources.origin import locate_chunks
from litdata_stream._sources.posix import detect_posix
from litdata_stream._sources.source import check_verifiable
from litdata_stream._state_fields import state_base, state_int, state_topology, state_upstream_order
from litdata_stream._upstream_state import (
    UpstreamResume,
    is_upstream_state,
    resume_point,
    upstream_resume,
    upstream_state_fields,
)

__all__ = ["StreamingDataset", "adopt_upstream_order", "dataset_label", "reader_of"]

_STATE_VERSION = 2  # 2: samples inside a chunk are shuffled by hashed_permutation (_pass_plan)
_SMALL_CACHE_BYTES = 25 * 10**9


def _subsample_lists(
    counts: Sequence[int] | np.ndarray, fraction: float, seed: int, shuffle: bool
) -> list[np.ndarray | None] | None:
    """Per chunk, the item positions kept by ``subsample``; None when that is every item, in order.

    Whole chunks, as upstream LitData takes them, so only those are ever downloaded: one copy of
    every chunk per whole unit of ``fraction``, then chunks in turn until ``floor(rest * total)``
    items are taken, the last one giving only its first items. The turn is the index order, or
    with ``shuffle`` an order drawn from ``seed`` (a new permutation per copy and one for the rest,
    each applied to the previous order: the chunks upstream picks for the same seed).
    """
    if math.isclose(fraction, 1.0):
        return None
    lengths = [int(n) for n in counts]
    count = len(lengths)
    rng = python_random_state(seed) if shuffle else None  # seeded like upstream's RandomState([seed])
    order = np.arange(count)
    parts: list[list[np.ndarray]] = [[] for _ in range(count)]
    while fraction >= 1.0:  # one copy at a time, so the rest rounds exactly as upstream's
        order = order[rng.permutation(count)] if rng is not None else order
        for c in range(count):
            parts[c].append(np.arange(lengths[c]))
        fraction -= 1.0
    if fraction > 0:
        order = order[rng.permutation(count)] if rng is not None else order
        take = int(int(sum(lengths)) * fraction)
        for c in order.tolist():
            if take <= 0:
                break
            parts[c].append(np.arange(min(lengths[c], take)))
            take -= lengths[c]
    return [np.sort(np.concatenate(p)) if p else np.empty(0, dtype=np.int64) for p in parts]


class StreamingDataset(EpochsOwner, IterableDataset):
    """Stream an optimized dataset from local disk or object storage.

    Args:
        input_dir: the dataset: a local path, a URL (``s3://``, ``gs://``, ...) or a ``Dir``. A
            folder of Parquet files with no ``index.json`` is indexed on first use; a path ending
            in ``.parquet`` selects files by a basename pattern (``s3://b/data/train-*.parquet``).
        cache_dir: where remote chunks are cached (default: a folder per dataset under the cache root).
        item_loader: how items are laid out; read from the index by default (``TokensLoader``
            needs ``block_size``; a Parquet index gets ``ParquetLoader()``).
        shuffle: permute chunks and the samples inside them, differently every epoch.
        drop_last: drop the tail so every rank and worker yields whole, equal batches (default:
            True when training on several processes, else False).
        seed: the shuffle and subsample seed.
        serializers: extra serializers by key, as given to the writer.
        max_cache_size: the byte cap of the local chunk cache (int, ``"50GB"``, or a fraction of free space).
        subsample: the fraction of samples to use, in whole chunks (the first ones, or with
            ``shuffle`` ones drawn from ``seed``, as upstream); above 1, whole copies plus a fraction.
        encryption: the key for encrypted datasets.
        storage_options: credentials and endpoint for the object store.
        session_options: boto3-style session options (``profile_name``, ``region_name``).
        max_pre_download: chunks to fetch ahead of the one being read.
        index_path: read ``index.json`` from this path (a file or a folder, local or a URL)
            instead of the dataset directory, e.g. a Parquet index written elsewhere.
        force_override_state_dict: accept a state dict recorded with another seed / shuffle setting.
        transform: a callable, or a list of callables, applied to each sample.
        num_canonical_nodes: accepted for compatibility; the split here never depends on it.
        allow_pickle: whether values stored with pickle (``pickle`` and ``graph`` leaves, MDS
            ``pkl`` columns) may be read; unpickling runs code from the data. None follows
            ``LITDATA_ALLOW_PICKLE``, which allows it when unset (as upstream). See docs/streaming.md.
        verify_chunks: check each chunk of a local dataset against the checksum its index records
            the first time this process opens it (costs a read of the file). Remote chunks are
            always checked, as downloaded; see docs/cache.md. A malformed checksum, or one of an
            unknown algorithm, is then an error naming the chunk; chunks without a checksum are
            read unverified after one warning naming them.
    """

    _sized_passes: ClassVar[bool] = True  # len(iter(ds)) == len(ds), as upstream

    # Whether a sample is exactly what the item loader reads (then batches may be gathered as arrays);
    # False for a subclass defining its own ``__getitem__`` (unless it sets it).
    samples_are_items: ClassVar[bool] = True
    # Whether a subclass defines ``transform``: it then runs on every sample, ``transform=`` or not.
    _transform_overridden: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if "__getitem__" in own and "samples_are_items" not in own:
            cls.samples_are_items = False
        if "transform" in own:
            cls._transform_overridden = True

    def __init__(
        self,
        input_dir: Any,
        cache_dir: Any = None,
        item_loader: BaseItemLoader | None = None,
        shuffle: bool = False,
        drop_last: bool | None = None,
        seed: int = 42,
        serializers: dict[str, Serializer] | None = None,
        max_cache_size: int | float | str | None = None,
        subsample: float = 1.0,
        encryption: Any = None,
        storage_options: dict[str, Any] | None = None,
        session_options: dict[str, Any] | None = None,
        max_pre_download: int = 2,
        index_path: str | None = None,
        force_override_state_dict: bool = False,
        transform: Callable[[Any], Any] | Sequence[Callable[[Any], Any]] | None = None,
        num_canonical_nodes: int | None = None,
        allow_pickle: bool | None = None,
        verify_chunks: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(subsample, (int, float)) or subsample <= 0:
            raise ValueError(f"subsample must be a float with value greater than 0, got {subsample!r}")
        input_dir, self._file_pattern = split_file_pattern(input_dir)  # ".../train-*.parquet"
        self.cache_dir = cache_dir
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.subsample = float(subsample)
        self.force_override_state_dict = force_override_state_dict
        self.num_canonical_nodes = num_canonical_nodes
        self.serializers = serializers
        if transform is None:
            self._transforms: list[Callable[[Any], Any]] = []
        elif callable(transform):
            self._transforms = [transform]
        elif isinstance(transform, Sequence) and all(callable(t) for t in transform):
            self._transforms = list(transform)
        else:
            raise NotCallableError(
                f"Transform should be a callable. Found {transform!r}: transform must be a callable or a list of "
                "callables"
            )

        _check_item_loader(input_dir, item_loader)
        self.distributed_env = DistributedEnv.detect()
        self._drop_last = None if drop_last is None else bool(drop_last)  # None: whether several processes read
        notice_drop_last(self.drop_last, self.distributed_env.world_size)
        _notice_small_cache(max_cache_size)
        # Resolved once (a local path's resolution reads the mount table).
        resolved = resolve_dir(input_dir)
        posix = detect_posix(resolved.path if resolved.url is None else None)
        origin = locate_chunks(
            input_dir, resolved, in_place=posix.in_place, cache_dir=cache_dir, index_path=index_path,
            file_pattern=self._file_pattern, storage_options=storage_options, session_options=session_options,
            max_cache_size=max_cache_size, max_pre_download=max_pre_download, encryption=encryption,
            verify=bool(verify_chunks),
        )  # fmt: skip
        # Upstream's attribute: where the chunks are read from (a remote dataset's cache folder) and its URL.
        folder = resolved.path if resolved.url is None else origin.cache_dir
        self.input_dir = Dir(path=None if folder is None else str(folder), url=resolved.url)
        index = origin.index
        if origin.verify:
            check_verifiable(index)
        self._fingerprint = index.table.fingerprint()
        self.item_loader = loader_for(index) if item_loader is None else item_loader
        self.item_loader.setup(index, resolve_serializers(serializers), allow_pickle)
        counts = self.item_loader.item_counts(index)
        samples = int(counts.sum())
        # Parsed once, inherited by forked workers; sample_bytes: uncompressed bytes per sample on average.
        self._read = ReadState(
            origin,
            SampleMap(counts, _subsample_lists(counts, self.subsample, self.seed, self.shuffle)),
            posix,
            sample_bytes=int(index.table.chunk_bytes.sum()) / samples if samples else 0.0,
        )
        reader_of(self).source()  # a cache folder that cannot be used fails here, not at the first read

        self._epochs = Epochs()
        self.batch_size = 1
        self.num_workers = 0
        self._resume: dict[str, Any] | None = None

    # -- the options the chunk source uses: stored once, on the origin ------------------------
    @property
    def storage_options(self) -> Mapping[str, Any] | None:
        """Credentials and endpoint for the object store, as given."""
        return self._read.origin.storage_options

    @property
    def session_options(self) -> Mapping[str, Any] | None:
        """boto3-style session options, as given."""
        return self._read.origin.session_options

    @property
    def max_cache_size(self) -> int | float | str | None:
        """The byte cap of the local chunk cache, as given."""
        return self._read.origin.max_cache_size

    @property
    def max_pre_download(self) -> int:
        """Chunks fetched ahead of the one being read."""
        return self._read.origin.max_pre_download

    @property
    def index_path(self) -> str | None:
        """Where ``index.json`` is read from, when not from the dataset's folder."""
        return self._read.origin.index_path

    @property
    def encryption(self) -> Any:
        """The key for encrypted datasets, as given."""
        return self._read.origin.encryption

    @property
    def verify_chunks(self) -> bool:
        """Whether local chunks are checked against their recorded checksums when first opened."""
        return self._read.origin.verify

    @property
    def subsampled_files(self) -> list[str]:
        """The chunk files this dataset reads samples of (after ``subsample``, a subset or a split), in index order.

        Upstream LitData's attribute of the same name: a chunk two splits share is in both lists.
        """
        chunks = self._read.origin.index.chunks
        return [chunks[i].filename for i, count in enumerate(self._read.samples.lengths.tolist()) if count]

    # -- samples by index (read by the dataset's reader) -----------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_read"] = self._read.copy()  # each process opens its own source (a copy too: no shared handles)
        state.pop("_key_index", None)  # read again where it is used
        return state

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            return self.get_by_key(index)  # an int stays a position: get_by_key(5) finds the int key 5
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._read.samples)))]
        return reader_of(self).sample(int(index))

    def get_by_key(self, key: Any) -> Any:
        """The sample whose key is ``key`` (what ``optimize(key_fn=...)`` returned for it).

        Found through the dataset's key index whatever ``subsample`` keeps; ``dataset["key"]``
        does the same for str keys.

        Args:
            key: The sample's key, as ``key_fn`` returned it when the dataset was optimized.

        Raises:
            KeyError: no sample has this key, or the dataset has no key index.
        """
        found = self.__dict__.get("_key_index")
        if found is None:
            from litdata_stream._keys import load_keys

            found = load_keys(self.input_dir, self.storage_options, self.session_options)
            self.__dict__["_key_index"] = found
        position = found.get(normalize_key(key, "get_by_key"))
        if position is None:
            raise KeyError(f"no sample of {dataset_label(self)} has the key {key!r}")
        return reader_of(self).stored(position)  # a key names a stored item, kept or not

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """Samples ``indices`` at once, in that order, reading every chunk once (a map-style DataLoader's batch)."""
        if not self.samples_are_items:
            return [self[i] for i in indices]  # a subclass decides what one sample is
        return reader_of(self).samples(indices)

    def transform(self, sample: Any) -> Any:
        """Apply the ``transform`` callables to a sample; subclasses may override it.

        Args:
            sample: One sample as stored (what the item loader read).

        Returns:
            The sample after each ``transform`` callable, in the order they were given.
        """
        for fn in self._transforms:
            sample = fn(sample)
        return sample

    def get_len(self, num_workers: int, batch_size: int) -> int:
        """Samples this rank yields in the epoch (after a resume: those yielded before it and the rest).

        Args:
            num_workers: DataLoader workers per rank the samples are split over (0: the main process reads).
            batch_size: Samples per batch (each worker's last partial batch counts unless ``drop_last``).
        """
        self._follow_world()
        topology = self._topology(num_workers, batch_size)
        plans = self._rank_plans(topology)
        return self._before()[1] + sum(plan.num_samples - done for plan, done in plans)

    def __len__(self) -> int:
        return self.get_len(self.num_workers, self.batch_size)

    @property
    def num_samples(self) -> int:
        """All samples of the dataset (after subsampling), across ranks."""
        return len(self._read.samples)

    # -- settings the loader passes -------------------------------------------------------------
    def set_shuffle(self, shuffle: bool) -> None:
        """Shuffle (or not) from the next pass on.

        Args:
            shuffle: Whether the samples are read in a shuffled order (else in the order stored).
        """
        self.shuffle = bool(shuffle)

    @property
    def drop_last(self) -> bool:
        """Whether each worker's last partial batch is dropped (by default: when several processes read)."""
        return self.distributed_env.world_size > 1 if self._drop_last is None else self._drop_last

    @drop_last.setter
    def drop_last(self, drop_last: bool) -> None:
        self._drop_last = bool(drop_last)

    def set_drop_last(self, drop_last: bool) -> None:
        """Drop (or not) each worker's last partial batch.

        Args:
            drop_last: Whether each worker's last batch, when shorter than ``batch_size``, is left out.
        """
        self.drop_last = bool(drop_last)

    def set_batch_size(self, batch_size: int) -> None:
        """The batch size the plans and resume points count in.

        Args:
            batch_size: Samples per batch (the StreamingDataLoader sets it from its own ``batch_size``).
        """
        self.batch_size = int(batch_size)

    def set_num_workers(self, num_workers: int) -> None:
        """The DataLoader workers of each rank the samples are split over.

        Args:
            num_workers: DataLoader worker processes per rank (0 or None: the main process reads).
        """
        self.num_workers = int(num_workers or 0)

    # -- the hooks of ``_protocol.EpochsOwner`` (documented there) ------------------------------
    def _loader_plan(self) -> LoaderPlan:
        topology = self._topology()
        left = tuple(batches_left(plan, done, topology) for plan, done in self._rank_plans(topology))
        return LoaderPlan(left, before=self._before()[0])

    def _gathered_sample_bytes(self, collate: Callable[[list[Any]], Any]) -> float | None:
        reader = reader_of(self)
        return reader.sample_bytes if reader.gathers(collate) else None

    def _in_place_chunk_bytes(self) -> int:
        origin = self._read.origin
        if origin.directory is None:
            return 0
        sizes = origin.index.table.chunk_bytes
        return int(sizes.max()) if len(sizes) else 0

    def _load_loader_state(self, state: dict[str, Any]) -> None:
        self.load_state_dict(state["dataset"])

    # -- a pass: its plan and resume point here, the reading in the reader -----------------------
    @property
    def shuffle_mode(self) -> str:
        """``"none"``, ``"full"`` or ``"window:<size>"``: how the epoch order is drawn."""
        if not self.shuffle:
            return "none"
        window = self._read.posix.window
        return "full" if window is None else f"window:{window}"

    def _run_start(self, topology: Topology, epoch: int) -> tuple[list[Interval], int, int]:
        """(base, first worker, batches already delivered) that a pass of ``epoch`` continues from."""
        resume = self._resume
        if resume is None or resume["epoch"] != epoch:
            return [(0, len(self._read.samples))], 0, 0
        if resume["topology"] == topology.key:
            return resume["base"], resume["first_worker"], resume["batches"]
        return rebase_resume(resume, reader_of(self).epoch_order(resume["epoch"])), 0, 0

    def _rank_plans(self, topology: Topology, epoch: int | None = None) -> list[tuple[WorkerPlan, int]]:
        start = self._run_start(topology, self.current_epoch if epoch is None else epoch)
        return rank_shares(start, topology, self.distributed_env.global_rank)

    def _iterate(self, token: int | None, batching: Batching | None) -> Iterator[Any]:
        run = self._epochs.begin(token)
        worker = WorkerEnv.detect()
        topology = self._topology(num_workers=worker.world_size)
        plan, done = self._rank_plans(topology, run.epoch)[worker.rank]
        reader = reader_of(self)
        order = reader.epoch_order(run.epoch)
        intervals = skip_samples(order.read_order(plan.intervals), done)
        if batching is None:
            yield from reader.read_stretch(order, intervals)
        else:
            yield from batching.sent(reader.read_batches(order, intervals, batching), worker.rank)
        self._epochs.finish(run)

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self, num_samples_yielded: int | None = None, num_workers: int = 0, batch_size: int = 1,
                   batches_delivered: int | None = None) -> dict[str, Any]:  # fmt: skip
        topology = self._topology(num_workers, batch_size)
        batches_delivered = delivered_batches(self, num_samples_yielded, topology.batch_size, batches_delivered)
        epoch = self.current_epoch
        base, first, delivered = self._run_start(topology, epoch)
        upstream = self._read.upstream
        return {
            "state_version": _STATE_VERSION,
            "epoch": epoch,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "shuffle_mode": self.shuffle_mode,
            "dataset": self._fingerprint,
            "drop_last": self.drop_last,
            "subsample": self.subsample,
            "num_samples": len(self._read.samples),
            "base": [list(i) for i in base],
            "topology": list(topology.key),
            "batches": delivered + batches_delivered,
            "first_worker": first,
            "world_size": self.distributed_env.world_size,
            # The epoch read in upstream LitData's order (a loaded upstream state's), if any.
            **({"upstream_order": [upstream[0], upstream[1]]} if upstream else {}),
            **upstream_state_fields(
                topology,
                epoch,
                delivered + batches_delivered,
                directory=self._read.origin.directory,
                url=self._read.origin.url,
                cache_dir=self.cache_dir,
                block_size=self.item_loader.block_size if isinstance(self.item_loader, TokensLoader) else None,
                num_canonical_nodes=self.num_canonical_nodes,
                num_nodes=self.distributed_env.num_nodes,
            ),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from a state recorded by :meth:`state_dict` (possibly under another topology).

        The state may also be one recorded by upstream LitData's ``StreamingDataset`` (see ``_upstream_state``).

        Args:
            state_dict: A dict from :meth:`state_dict`, or upstream LitData's ``StreamingDataset`` state_dict.

        Raises:
            ValueError: the state is not a StreamingDataset's, or was recorded on another dataset or (unless
                ``force_override_state_dict``) with another seed, shuffle, drop_last or subsample.
        """
        if is_upstream_state(state_dict):
            self._load_upstream_state(state_dict)
            return
        kind = state_dict.get("kind")
        if kind is not None and kind != "StreamingDataset":
            raise ValueError(f"this state dict was recorded on a {kind}, not on a StreamingDataset")
        version = state_dict.get("state_version")
        if version == 1 and not state_dict.get("shuffle"):
            version = _STATE_VERSION  # without shuffling, version 1's order is this version's
        if version == 1:
            raise ValueError(
                "this state dict was written by an earlier litdata release (state_version 1), which shuffled "
                "the samples inside a chunk in another order: resuming its shuffled epoch here would repeat "
                "some samples and skip others. Finish that epoch with the release that wrote it, or start the "
                f"epoch over here (dataset.set_epoch({state_dict.get('epoch')!r}) instead of load_state_dict)"
            )
        if version != _STATE_VERSION:
            raise ValueError(
                f"this state dict was written neither by this StreamingDataset (no state_version {_STATE_VERSION}) "
                "nor by upstream LitData's (no input_dir_path, region_of_interest or sample_in_epoch)"
            )
        if state_dict.get("num_samples") != len(self._read.samples):
            raise ValueError(
                f"the state dict was recorded on a dataset of {state_dict['num_samples']} samples but this one has "
                f"{len(self._read.samples)}; it is not the same dataset (or subsample differs)"
            )
        recorded = state_dict.get("dataset")
        if recorded is not None and recorded != self._fingerprint:
            raise ValueError(
                f"the state dict was recorded on another dataset (chunk list fingerprint {recorded}, this one is "
                f"{self._fingerprint}); resume with the dataset it was recorded on"
            )
        if not self.force_override_state_dict:
            for field in ("seed", "shuffle", "shuffle_mode", "drop_last", "subsample"):
                if field not in state_dict:
                    continue
                if state_dict[field] != getattr(self, field):
                    raise ValueError(
                        f"The provided `{field}` state doesn't match the current one. Found "
                        f"`{getattr(self, field)!r}` instead of `{state_dict[field]!r}`: the state dict was recorded "
                        f"with {field}={state_dict[field]!r} but this dataset has {field}={getattr(self, field)!r}; "
                        "use the same value or force_override_state_dict=True"
                    )
        where = dataset_label(self)
        samples = len(self._read.samples)
        topology = state_topology(state_dict, "topology", where)
        self._resume = {
            "epoch": state_int(state_dict, "epoch", where),
            "base": state_base(state_dict, "base", where, samples),
            "topology": topology.key,
            "batches": state_int(state_dict, "batches", where, high=samples),
            "first_worker": state_int(state_dict, "first_worker", where, high=topology.num_workers - 1),
        }
        self._epochs.set(self._resume["epoch"])
        self._read.upstream = state_upstream_order(state_dict, "upstream_order", where)

    def _load_upstream_state(self, state: dict[str, Any]) -> None:
        """Continue an epoch upstream LitData's loader had delivered part of, in upstream's order."""
        found = adopt_upstream_order(self, state)
        where = dataset_label(self)
        base, batches, exact = resume_point(len(reader_of(self).epoch_order(found.epoch)), found)
        recorded = found.topology
        self._epochs.set(found.epoch)
        self._resume = {
            "epoch": found.epoch,
            "base": base,
            "topology": recorded.key,
            "batches": batches,
            "first_worker": 0,
        }
        now = self._topology()
        if now.key != recorded.key:
            why = (
                f"it was recorded with world_size={recorded.world_size}, num_workers={recorded.num_workers}, "
                f"batch_size={recorded.batch_size}, drop_last={recorded.drop_last} and is resumed with "
                f"{now.world_size}, {now.num_workers}, {now.batch_size}, {now.drop_last}"
            )
        else:
            why = "upstream splits an epoch over several ranks without drop_last otherwise than this library"
        if not exact or now.key != recorded.key:
            warnings.warn(
                f"{where}: resuming an upstream LitData state dict: the rest of epoch {found.epoch} holds exactly "
                f"the samples upstream had not delivered, but not in the order upstream would give them ({why})",
                UserWarning,
                stacklevel=3,
            )

    # -- views ----------------------------------------------------------------------------------
    def subset(self, indices: Sequence[int] | range | slice) -> StreamingDataset:
        """A dataset over the given global sample indexes (list, range or slice) of this one.

        Args:
            indices: Global sample indexes of this dataset; the subset reads them in ascending order.

        Returns:
            A new dataset with epochs of its own, starting at this one's current epoch.

        Raises:
            IndexError: an index is outside ``[0, num_samples)``.
        """
        samples = self._read.samples
        if isinstance(indices, slice):
            indices = range(*indices.indices(len(samples)))
        chosen = np.asarray(list(indices), dtype=np.int64)
        if chosen.size and (chosen.min() < 0 or chosen.max() >= len(samples)):
            raise IndexError(f"subset indexes must be in [0, {len(samples)}); got {chosen.min()}..{chosen.max()}")
        clone = self.__class__.__new__(self.__class__)
        clone.__dict__.update(self.__getstate__())
        clone._read = self._read.copy(samples=samples.subset(np.sort(chosen)), upstream=None)
        clone._resume = None
        clone._epochs = Epochs(self.current_epoch)  # a dataset of its own: its own passes
        return clone


def reader_of(dataset: StreamingDataset) -> StreamingReader:
    """The reader of ``dataset`` as it is set now (a later ``set_shuffle`` changes the next one)."""
    transform = dataset.transform if dataset._transforms or dataset._transform_overridden else None
    getitem = None if dataset.samples_are_items else dataset.__getitem__
    # positional: a NamedTuple built by keyword costs more, and dataset[i] builds one per call
    return StreamingReader(
        ReadSpec(dataset._read, dataset.item_loader, dataset.seed, dataset.shuffle, transform, getitem)
    )


def adopt_upstream_order(dataset: StreamingDataset, state: dict[str, Any]) -> UpstreamResume:
    """Have ``dataset`` read the epoch of upstream's ``state`` in upstream's order; return its resume point."""
    read = dataset._read
    found = upstream_resume(state, dataset_label(dataset), read.samples.lengths.tolist(), dataset.shuffle, dataset.seed)
    read.upstream = (found.epoch, found.order_key())
    return found


def dataset_label(dataset: StreamingDataset) -> str:
    """A dataset as messages name it: ``StreamingDataset('s3://bucket/data')`` (its URL, else its folder)."""
    return f"StreamingDataset({dataset.input_dir.url or dataset.input_dir.path!r})"


def _notice_small_cache(max_cache_size: Any) -> None:
    """Log, as upstream does, when a fixed ``max_cache_size`` is under 25 GB (fractions and None are not checked)."""
    if isinstance(max_cache_size, bool) or not isinstance(max_cache_size, (int, str)):
        return
    if isinstance(max_cache_size, str) and "." in max_cache_size:
        try:
            float(max_cache_size)  # "0.9": a fraction of the free space
            return
        except ValueError:
            pass  # "1.5GB": a size
    try:
        size = parse_size(max_cache_size, name="max_cache_size")
    except (TypeError, ValueError):
        return  # the cache reports a malformed value when it opens, naming it
    if size < _SMALL_CACHE_BYTES:
        logger.warning(  # upstream's words
            "The provided `max_cache_size` is less than 25GB. It is %s bytes: with several DataLoader workers "
            "each holding the chunk being read and `max_pre_download` chunks ahead, a small cache evicts chunks "
            "that are read again soon (and waits for room); consider at least 25GB, or a fraction such as 0.5 of "
            "the free disk.",
            f"{size:,}",
        )


def _check_item_loader(input_dir: Any, item_loader: Any) -> None:
    """Refuse a loader class given for an instance, and any loader but ParquetLoader for ``hf://datasets``."""
    hf = isinstance(input_dir, str) and input_dir.startswith("hf://datasets")
    where = " for hf://datasets." if hf else ":"  # upstream's sentence for hf://, which code may match
    if isinstance(item_loader, type):
        name = item_loader.__name__
        raise ValueError(f"Invalid item_loader{where} item_loader={name} is a class; pass an instance: {name}()")
    if hf and item_loader is not None and not isinstance(item_loader, ParquetLoader):
        raise ValueError(
            f"Invalid item_loader{where} {type(item_loader).__name__} cannot read a Parquet dataset; pass "
            "item_loader=ParquetLoader(...) or leave it out"
        )
