"""The key index of a dataset (``keys/shard-NNNNN.parquet``, upstream's layout): written, built, used.

``optimize(key_fn=...)``: each worker returns its samples' keys in its sample order, so once the
index is merged each key's position follows from where the rank's chunks landed (:func:`publish_keys`).
``build_keys_index(dir, key_fn)`` reads a dataset once and writes the key index ``key_fn`` would have.
``dataset_update(dir)`` replaces whole samples by key: ``commit()`` rewrites each chunk holding one
(same file name, same layout), then ``index.json``. These two work on a local folder, as upstream's do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from litdata_format import INDEX_FILENAME, BinaryWriter, DatasetIndex, DatasetReader, layout_differences, load_index
from litdata_format.internal import (
    KEYS_FILE,
    keys_parquet,
    normalize_key,
    parse_chunk_name,
    read_keys,
    write_file_atomic,
    write_json_atomic,
)
from litdata_io import Dir
from litdata_prep._output import Output
from litdata_prep._output_lock import hold_output
from litdata_prep._staging import update_staging

__all__ = ["KEYS_DIR", "DatasetUpdate", "build_keys_index", "dataset_update", "publish_keys"]

KEYS_DIR = KEYS_FILE.partition("/")[0] + "/"
_SECTION = {"version": 1, "num_shards": 1, "sharding": "none"}
_ARROW_ROWS_MAGIC = b"LDARW01\x00"


def publish_keys(
    output: Output, index: DatasetIndex, existing: DatasetIndex | None, rank_keys: dict[int, list[Any]]
) -> dict[str, Any]:
    """Write the key index of ``index``'s new chunks (and of the dataset appended to); its ``index.json`` entry.

    Raises:
        ValueError: two samples share a key, keys mix str and int, or a rank's keys do not match its chunks.
    """
    old = {chunk.filename for chunk in existing.chunks} if existing is not None else set()
    positions: dict[int, list[int]] = {rank: [] for rank in rank_keys}
    start = 0
    for chunk in index.chunks:
        parsed = parse_chunk_name(chunk.filename)
        if chunk.filename not in old and parsed is not None and parsed[0] in positions:
            positions[parsed[0]].extend(range(start, start + chunk.chunk_size))
        start += chunk.chunk_size
    pairs: list[tuple[Any, int]] = []
    if existing is not None:  # the keys of the dataset appended to, when it has a key index
        with contextlib.suppress(FileNotFoundError):
            pairs = list(read_keys([output.get(KEYS_FILE)], output.url_for(KEYS_FILE)).items())
    for rank, keys in rank_keys.items():
        if len(keys) != len(positions[rank]):
            raise RuntimeError(
                f"worker {rank} computed {len(keys)} keys but its chunks hold {len(positions[rank])} samples"
            )
        pairs.extend(zip(keys, positions[rank]))
    output.put(KEYS_FILE, keys_parquet(pairs, [chunk.chunk_size for chunk in index.chunks]))
    return dict(_SECTION)


def _dataset_dir(input_dir: str | os.PathLike[str], what: str) -> Path:
    text = os.fspath(input_dir)
    if "://" in text:
        raise ValueError(
            f"{what}: {text} is not a local folder; like upstream's, it works on a local dataset folder "
            "(download the dataset first, or run it where the folder is)"
        )
    path = Path(text)
    if not (path / INDEX_FILENAME).is_file():
        raise FileNotFoundError(f"{what}: {path} has no {INDEX_FILENAME}; give the folder optimize wrote")
    return path


def build_keys_index(
    input_dir: str | os.PathLike[str],
    key_fn: Callable[[Any], Any],
    *,
    output_dir: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    verbose: bool = True,
    num_shards: int = 1,
) -> str:
    """Read every sample of an optimized dataset, call ``key_fn`` on it and write the key index.

    Args:
        input_dir: a local dataset folder.
        key_fn: ``sample -> key``, a str or an int, unique across the dataset.
        output_dir: where ``keys/`` goes (and whose ``index.json``, if any, records it); default
            ``input_dir``.
        overwrite: replace a key index that is already there.
        verbose: show a progress bar.
        num_shards: split the index into this many Parquet files by a hash of the key.

    Returns:
        The path of the ``keys`` folder.

    Raises:
        FileExistsError: a key index exists and ``overwrite`` is False.
        ValueError: two samples share a key, keys mix str and int, or a key is not a str or an int.
    """
    if not callable(key_fn):
        raise TypeError(f"build_keys_index: key_fn must be callable (a sample -> its str or int key), got {key_fn!r}")
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"build_keys_index: num_shards must be a positive int, got {num_shards!r}")
    source = _dataset_dir(input_dir, "build_keys_index")
    target = Path(output_dir) if output_dir is not None else source
    with hold_output(Output(Dir(path=str(target)), None), None, what="build_keys_index"):
        if not overwrite and ((target / KEYS_FILE).is_file() or (target / "keys.parquet").is_file()):
            raise FileExistsError(
                f"build_keys_index: {target} already has a key index; pass overwrite=True to replace it"
            )
        reader = DatasetReader(source)
        try:
            samples: Any = range(len(reader))
            if verbose:
                from tqdm.auto import tqdm

                samples = tqdm(samples, desc="Building keys index", unit="sample")
            pairs = [(normalize_key(key_fn(reader[i]), f"key_fn on sample {i}"), i) for i in samples]
        finally:
            reader.close()
        sizes = [chunk.chunk_size for chunk in reader.index.chunks]
        keys_parquet(pairs, sizes)  # checks uniqueness and one key type across every shard
        by_shard: list[list[tuple[str | int, int]]] = [[] for _ in range(num_shards)]
        for key, position in pairs:  # upstream's hash, so the layouts agree
            digest = hashlib.blake2b(str(key).encode("utf-8"), digest_size=8).digest()
            by_shard[int.from_bytes(digest, "little") % num_shards].append((key, position))
        shutil.rmtree(target / KEYS_DIR, ignore_errors=True)
        (target / "keys.parquet").unlink(missing_ok=True)  # upstream's older single file, now replaced
        (target / KEYS_DIR).mkdir(parents=True)
        for shard, part in enumerate(by_shard):
            write_file_atomic(target / f"{KEYS_DIR}shard-{shard:05d}.parquet", keys_parquet(part, sizes))
        index_path = target / INDEX_FILENAME
        if index_path.is_file():
            index = json.loads(index_path.read_text())
            index["keys"] = {"version": 1, "num_shards": num_shards, "sharding": "hash" if num_shards > 1 else "none"}
            write_json_atomic(index_path, index)
        return str(target / KEYS_DIR)


def dataset_update(input_dir: str | os.PathLike[str]) -> DatasetUpdate:
    """A session that replaces samples of a keyed dataset by key.

    Args:
        input_dir: the local folder of a dataset with a key index (``key_fn`` or ``build_keys_index``).

    Example::

        with dataset_update("optimized_data") as update:
            update["sample-id"] = {"x": 1, "y": 2}
            update.commit()
    """
    return DatasetUpdate(input_dir)


class DatasetUpdate:
    """Replaces whole samples by key: stage with ``update[key] = sample``, then :meth:`commit`.

    Leaving the ``with`` block without ``commit()`` drops what was staged; after ``commit()``
    the session takes no more changes. The dataset needs a key index (``optimize(key_fn=...)``
    or :func:`build_keys_index`). A replaced sample must be stored like the others (the same
    fields and kinds of values); the key index does not change.
    """

    def __init__(self, input_dir: str | os.PathLike[str]) -> None:
        self._dir = _dataset_dir(input_dir, "dataset_update")
        self._index = load_index(self._dir)
        files = sorted((self._dir / KEYS_DIR).glob("shard-*.parquet")) or sorted(self._dir.glob("keys.parquet"))
        if not files:
            raise FileNotFoundError(
                f"dataset_update: {self._dir} has no key index ({KEYS_FILE}); run optimize(..., key_fn=...) or "
                "build_keys_index(dir, key_fn) first"
            )
        self._key_files = files
        self._pending: dict[str | int, Any] = {}
        self._committed = False

    def __enter__(self) -> DatasetUpdate:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pending.clear()

    def __setitem__(self, key: Any, sample: Any) -> None:
        self.replace(key, sample)

    def replace(self, key: Any, sample: Any) -> None:
        """Stage ``sample`` as the new sample of ``key`` (checked at :meth:`commit`).

        Args:
            key: the key of the sample to replace (a str or an int, as the key index holds).
            sample: the new sample, stored as the dataset stores its samples.
        """
        if self._committed:
            raise RuntimeError("dataset_update: this session was committed; open a new one for more changes")
        self._pending[normalize_key(key, "dataset_update key")] = sample

    def commit(self) -> None:
        """Rewrite the chunks that hold the staged samples, then ``index.json``.

        Raises:
            KeyError: a staged key is not in the key index.
            ValueError: the dataset cannot be rewritten here (encrypted, not PyTree items), or a
                new sample is stored differently from the dataset's.
        """
        if self._committed:
            raise RuntimeError("dataset_update: this session was committed already")
        self._committed = True
        if not self._pending:
            return
        # Another job writing the dataset (an append, another commit) is waited for, and what it wrote is kept.
        with hold_output(Output(Dir(path=str(self._dir)), None), None, what="dataset_update"):
            self._index = load_index(self._dir)
            config = self._index.config
            if config.get("encryption") or self._index.item_loader != "PyTreeLoader" or config.get("format") == "mds":
                what = "encrypted" if config.get("encryption") else f"read with {self._index.item_loader}"
                raise ValueError(
                    f"dataset_update: {self._dir} is {what}; only PyTree datasets without encryption can be updated"
                )
            positions = read_keys([path.read_bytes() for path in self._key_files], f"{self._dir}/{KEYS_DIR}")
            missing = [key for key in self._pending if key not in positions]
            if missing:
                raise KeyError(f"dataset_update: unknown key {missing[0]!r} (not in the key index of {self._dir})")
            reader = DatasetReader(self._dir)
            rewritten: list[tuple[int, Path, dict[str, Any]]] = []
            try:
                by_chunk: dict[int, dict[int, tuple[str | int, Any]]] = {}
                for key, sample in self._pending.items():
                    number, offset = reader.locate(positions[key])
                    by_chunk.setdefault(number, {})[offset] = (key, sample)
                for number, updates in sorted(by_chunk.items()):
                    rewritten.append(self._rewrite(reader, number, updates))
            except BaseException:
                for _, path, _ in rewritten:  # nothing of the dataset changed yet
                    shutil.rmtree(path.parent, ignore_errors=True)
                raise
            finally:
                reader.close()
            data = json.loads((self._dir / INDEX_FILENAME).read_text())
            for number, path, entry in rewritten:
                os.replace(path, self._dir / entry["filename"])  # same name: the chunk is replaced whole
                shutil.rmtree(path.parent, ignore_errors=True)
                data["chunks"][number] = entry
            write_json_atomic(self._dir / INDEX_FILENAME, data)
            self._pending.clear()

    def _rewrite(
        self, reader: DatasetReader, number: int, updates: dict[int, tuple[str | int, Any]]
    ) -> tuple[int, Path, dict[str, Any]]:
        """Chunk ``number`` with ``updates`` applied, in a folder next to the dataset: its number, file and entry."""
        info = self._index.chunks[number]
        parsed = parse_chunk_name(info.filename)
        if parsed is None:
            raise ValueError(f"dataset_update: chunk {info.filename} is not named chunk-R-N; it cannot be rewritten")
        start = sum(chunk.chunk_size for chunk in self._index.chunks[:number])
        samples = [updates[i][1] if i in updates else reader[start + i] for i in range(info.chunk_size)]
        config = self._index.config
        rows = _is_arrow_rows(self._dir / info.filename)
        # An Arrow rows chunk is rewritten as Arrow rows, a PyTree one in the dataset's compression.
        compression = ("zstd" if config.get("ipc_compression") else None) if rows else config.get("compression")
        level = None if rows else (config.get("compression_level") or ("chunk" if compression else None))
        folder = update_staging(self._dir)
        try:
            writer = BinaryWriter(
                folder,
                chunk_size=len(samples),
                compression=compression,
                compression_level=level,
                compression_batch_size=None if rows else config.get("compression_batch_size"),
                rank=parsed[0],
                chunk_index=parsed[1],
                arrow_rows=rows,
            )
            for i, sample in enumerate(samples):
                try:
                    writer.add_item(i, sample)
                except (ValueError, TypeError) as err:
                    given = f"the sample given for key {updates[i][0]!r}" if i in updates else f"sample {start + i}"
                    raise ValueError(
                        f"dataset_update: {given} cannot be stored like the other samples of {info.filename}: {err}"
                    ) from None
            writer.done()
            (entry,) = writer.chunks
            path = folder / entry.filename
            # Arrow rows read the same whatever data_format says; PyTree items must match the config.
            differences = [] if rows else layout_differences(config, writer.config())
            if rows != _is_arrow_rows(path):
                differences = ["the fields' kinds (the chunk's rows would disagree, so they would be stored as JSON)"]
            if differences or entry.filename != info.filename:
                raise ValueError(
                    f"dataset_update: the new samples of chunk {info.filename} would be stored differently from "
                    f"the dataset's ({', '.join(differences) or 'the file name'}); give samples with the same "
                    "fields and kinds of values as the others"
                )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return number, path, entry.to_json()


def _is_arrow_rows(path: Path) -> bool:
    """Whether the chunk file at ``path`` ends with upstream 0.2.76's Arrow rows trailer (FORMAT.md)."""
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() < len(_ARROW_ROWS_MAGIC):
            return False
        handle.seek(-len(_ARROW_ROWS_MAGIC), os.SEEK_END)
        return handle.read() == _ARROW_ROWS_MAGIC
