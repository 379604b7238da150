"""Drop-in behaviour checked against upstream LitData 0.2.76 run in its side venv: the samples
``train_test_split`` puts in each split, samples written with out-of-order indexes, and the
subpackages ``import litdata`` gives."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter, FernetEncryption, RSAEncryption
from litdata_io import Dir
from litdata_stream import (
    Cache,
    CombinedStreamingDataset,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
    train_test_split,
)
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]


# -- train_test_split ---------------------------------------------------------------------------
def _write(path: Path, n: int, ranks: int = 1, **options: Any) -> str:
    """``n`` samples ``{"id": i, "pad": ...}`` (padding of varying size, for uneven ``chunk_bytes`` chunks)."""
    per_rank = -(-n // ranks)
    writers = [BinaryWriter(path, rank=rank, **options) for rank in range(ranks)]
    for rank, writer in enumerate(writers):
        for i in range(rank * per_rank, min(n, (rank + 1) * per_rank)):
            writer.add_item(i, {"id": i, "pad": "x" * (i * 37 % 300)})
        writer.done()
    writers[0].merge(num_workers=ranks)
    return str(path)


SPLIT_IDS = """
import json, pickle, sys
from litdata import StreamingDataset, train_test_split
out = []
for job in json.loads(sys.argv[2]):
    ds = StreamingDataset(job["dir"], subsample=job["subsample"])
    parts = train_test_split(ds, job["splits"], seed=job["seed"], shuffle=job["shuffle"])
    out.append([[int(part[i]["id"]) for i in range(len(part))] for part in parts])
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


def _split_job(path: str, subsample: float, seed: int, splits: list[float], shuffle: bool) -> dict[str, Any]:
    return {"dir": path, "subsample": subsample, "seed": seed, "splits": splits, "shuffle": shuffle}


def test_train_test_split_puts_upstreams_samples_in_each_split(tmp_path: Path) -> None:
    layouts = {
        "chunk_size=7": _write(tmp_path / "a", 100, chunk_size=7),
        "one sample per chunk": _write(tmp_path / "b", 37, chunk_size=1),
        "1000 samples": _write(tmp_path / "c", 1000, chunk_size=64),
        "uneven chunk_bytes": _write(tmp_path / "d", 150, chunk_bytes=4000),
        "two ranks": _write(tmp_path / "e", 101, ranks=2, chunk_size=6),
    }
    jobs = []
    for name, path in layouts.items():
        for seed in (0, 42, 1234):
            for splits in ([0.33, 0.33, 0.34], [0.8, 0.1, 0.1], [0.29, 0.1], [0.5, 0.25, 0.25]):
                jobs.append(
                    {"name": name, "dir": path, "subsample": 1.0, "seed": seed, "splits": splits, "shuffle": True}
                )
        jobs.append({"name": name, "dir": path, "subsample": 1.0, "seed": 7, "splits": [0.6, 0.4], "shuffle": False})
        jobs.append({"name": name, "dir": path, "subsample": 0.5, "seed": 3, "splits": [0.5, 0.3], "shuffle": True})
    theirs = run_upstream(SPLIT_IDS, json.dumps(jobs))
    for job, upstream in zip(jobs, theirs, strict=True):
        ds = StreamingDataset(job["dir"], subsample=job["subsample"])
        parts = train_test_split(ds, job["splits"], seed=job["seed"], shuffle=job["shuffle"])
        ours = [sorted(int(part[i]["id"]) for i in range(len(part))) for part in parts]
        # The same members; each split numbers them in index order here (upstream: in the drawn chunk order).
        assert ours == [sorted(ids) for ids in upstream], job


# -- out-of-order indexes -----------------------------------------------------------------------
def _windows(n: int, width: int, seed: int) -> list[int]:
    """0..n-1, shuffled inside consecutive windows of ``width`` (what workers handing samples back do)."""
    rng = random.Random(seed)
    keys: list[int] = []
    for start in range(0, n, width):
        window = list(range(start, min(n, start + width)))
        rng.shuffle(window)
        keys += window
    return keys


UPSTREAM_PATTERN = [2, 3, 1, 4, 6, 5, 7, 8, 11, 9, 10, 12]  # upstream's test_writer_unordered_indexes, item i - 1

READ_AND_WRITE = """
import json, pickle, sys, os
from litdata import StreamingDataset
from litdata.streaming.writer import BinaryWriter

def read(folder):
    ds = StreamingDataset(folder)
    return [ds[i] for i in range(len(ds))]

out = {"read": [], "written": [], "chunk_sizes": []}
for n, job in enumerate(json.loads(sys.argv[2])):
    out["read"].append(read(job["dir"]))
    if "keys" not in job:
        continue
    folder = os.path.abspath(f"up-{n}")  # upstream's own writer given the same indexes
    writer = BinaryWriter(folder, chunk_size=job["chunk_size"])
    for key in job["keys"]:
        value = key - job["offset"]
        writer[key] = {"id": value, "name": f"s{value}"} if job["rows"] else value
    writer.done()
    writer.merge()
    out["written"].append(read(folder))
    with open(os.path.join(folder, "index.json")) as f:
        out["chunk_sizes"].append([c["chunk_size"] for c in json.load(f)["chunks"]])
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""


def _sample(key: int, offset: int, rows: bool) -> Any:
    return {"id": key - offset, "name": f"s{key - offset}"} if rows else key - offset


def test_out_of_order_indexes_are_stored_at_their_index(tmp_path: Path) -> None:
    jobs: list[dict[str, Any]] = [
        {"keys": UPSTREAM_PATTERN, "offset": 1, "chunk_size": 5, "rows": False},
        {"keys": UPSTREAM_PATTERN, "offset": 1, "chunk_size": 5, "rows": True},
        {"keys": _windows(60, 4, seed=1), "offset": 0, "chunk_size": 5, "rows": False},
        {"keys": _windows(300, 8, seed=2), "offset": 0, "chunk_size": 16, "rows": True},
        {"keys": _windows(40, 3, seed=3), "offset": 0, "chunk_size": 40, "rows": True},
    ]
    for n, job in enumerate(jobs):
        job["dir"] = str(tmp_path / f"ours-{n}")
        writer = BinaryWriter(job["dir"], chunk_size=job["chunk_size"])
        for key in job["keys"]:
            writer[key] = _sample(key, job["offset"], job["rows"])
        writer.done()
        writer.merge()
    # Cache[i] = item, as upstream's Cache takes samples.
    cache_dir = str(tmp_path / "cache")
    cache = Cache(cache_dir, chunk_size=4)
    for key in _windows(30, 3, seed=5):
        cache[key] = {"id": key}
    cache.done()
    cache.merge()
    theirs = run_upstream(READ_AND_WRITE, json.dumps([*jobs, {"dir": cache_dir}]))
    results = zip(jobs, theirs["read"][:-1], theirs["written"], theirs["chunk_sizes"], strict=True)
    for job, upstream_read, upstream_written, upstream_sizes in results:
        expected = [_sample(k + job["offset"], job["offset"], job["rows"]) for k in range(len(job["keys"]))]
        ds = StreamingDataset(job["dir"])
        assert [ds[i] for i in range(len(ds))] == expected  # ours reading ours
        assert upstream_read == expected  # upstream reading ours
        assert upstream_written == expected  # what upstream's own writer does with the same indexes
        ours = json.loads((Path(job["dir"]) / "index.json").read_text())["chunks"]
        assert [c["chunk_size"] for c in ours] == upstream_sizes  # and the same chunks ([5, 5, 2] for its test)
    ds = StreamingDataset(cache_dir)
    assert [ds[i]["id"] for i in range(len(ds))] == list(range(30))
    assert [s["id"] for s in theirs["read"][-1]] == list(range(30))


def test_an_index_given_twice_or_too_late_is_refused(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=4)
    writer[0] = 0
    with pytest.raises(ValueError, match="The provided index 0 already exists in the cache"):
        writer[0] = 1
    writer[2] = 2
    writer[3] = 3  # 2 and 3 wait for 1
    with pytest.raises(ValueError, match="sample 3 was given twice"):
        writer[3] = 3
    writer[1] = 1
    writer[4] = 4  # chunk 0..3 written
    with pytest.raises(ValueError, match=r"sample 1 came after chunk-0-0.bin, holding samples up to 3"):
        writer[1] = 1
    writer.done()
    writer.merge()
    ds = StreamingDataset(str(tmp_path))
    assert [ds[i] for i in range(len(ds))] == [0, 1, 2, 3, 4]


def test_a_missing_index_is_awaited_for_a_chunks_worth_then_still_placed_if_it_comes(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=6)
    for key in (0, 2, 10, 11, 12, 13, 14):  # six wait for 1: the chunk goes on past it, to 2
        writer[key] = key
    writer[1] = 1  # the chunk is not written yet: 1 takes its place in it
    for key in (*range(3, 10), 15):
        writer[key] = key
    writer.done()
    writer.merge()
    ds = StreamingDataset(str(tmp_path))
    assert [ds[i] for i in range(len(ds))] == list(range(16))


def test_strided_indexes_fill_whole_chunks(tmp_path: Path) -> None:
    # What a DataLoader worker writing a Cache gets: every 4th batch of 16 (docs/mixing.md's example).
    keys = [k for start in range(0, 1600, 64) for k in range(start, start + 16)]
    writer = BinaryWriter(tmp_path, chunk_size=100)
    for key in keys:
        writer[key] = {"id": key}
    writer.done()
    writer.merge()
    chunks = json.loads((tmp_path / "index.json").read_text())["chunks"]
    assert [c["chunk_size"] for c in chunks] == [100] * 4
    ds = StreamingDataset(str(tmp_path))
    assert [ds[i]["id"] for i in range(len(ds))] == keys


def test_indexes_never_given_are_skipped_at_done(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, chunk_size=3)
    for key in (5, 1, 2, 9, 0):  # 3, 4, 6, 7, 8 never come
        writer[key] = key
    writer.done()
    writer.merge()
    ds = StreamingDataset(str(tmp_path))
    assert [ds[i] for i in range(len(ds))] == [0, 1, 2, 5, 9]


# -- import litdata -----------------------------------------------------------------------------
SUBPACKAGES = """
import pickle, sys, types
import litdata
names = [n for n, v in vars(litdata).items() if isinstance(v, types.ModuleType) and v.__name__.startswith("litdata.")]
with open(sys.argv[1], "wb") as f:
    pickle.dump(names, f)
"""
# Upstream's modules not provided here (docs/compat.md says why).
NOT_PROVIDED = {"__about__", "constants", "exceptions", "helpers"}


def test_import_litdata_gives_upstreams_subpackages_cheaply() -> None:
    theirs = set(run_upstream(SUBPACKAGES))
    assert {"streaming", "utilities", "processing", "raw"} <= theirs
    wanted = sorted(theirs - NOT_PROVIDED)
    # Touching the subpackages keeps `import litdata` cheap: torch comes with the first class that needs it.
    touch = f"import sys, litdata; [getattr(litdata, n) for n in {wanted!r}]; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", touch], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
    deep = (
        "import litdata\n"
        "assert litdata.streaming.dataset.StreamingDataset is litdata.StreamingDataset\n"
        "assert litdata.utilities.train_test_split.train_test_split is litdata.train_test_split\n"
        "assert litdata.processing.functions.optimize is litdata.optimize\n"
    )
    subprocess.run([sys.executable, "-c", deep], check=True)
    with pytest.raises(AttributeError, match="has no attribute 'not_a_module'"):
        import litdata

        _ = litdata.not_a_module  # type: ignore[attr-defined]


# -- upstream's spellings and messages ----------------------------------------------------------
def test_upstreams_argument_names_and_input_dir(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    writer = BinaryWriter(cache_dir=str(folder), chunk_size=3)
    for i in range(10):
        writer[i] = i
    writer.done()
    writer.merge()
    ds = StreamingDataset(str(folder))
    assert isinstance(ds.input_dir, Dir) and (ds.input_dir.path, ds.input_dir.url) == (str(folder), None)
    remote = StreamingDataset(f"local:{folder}", cache_dir=str(tmp_path / "cache"))
    assert remote.input_dir.url == f"local:{folder}"
    assert remote.input_dir.path is not None and remote.input_dir.path.startswith(str(tmp_path / "cache"))
    assert [len(s) for s in train_test_split(streaming_dataset=ds, splits=[0.5, 0.5])] == [5, 5]

    ds.load_state_dict(state_dict=ds.state_dict(num_samples_yielded=2, num_workers=0, batch_size=1))
    assert list(ds) == list(range(2, 10))
    for kind in (CombinedStreamingDataset, ParallelStreamingDataset):
        mixed = kind([StreamingDataset(str(folder)), StreamingDataset(str(folder))])
        fresh = kind([StreamingDataset(str(folder)), StreamingDataset(str(folder))])
        fresh.load_state_dict(state_dict=mixed.state_dict(num_samples_yielded=2, num_workers=0, batch_size=1))
        loader = StreamingDataLoader(mixed, batch_size=2)
        next(iter(loader))
        resumed = StreamingDataLoader(fresh, batch_size=2)
        resumed.load_state_dict(obj=loader.state_dict())
        assert len(list(resumed)) == len(loader) - 1


@pytest.mark.parametrize("cls", [FernetEncryption, RSAEncryption])
def test_encryption_level_message_has_upstreams_words(cls: type) -> None:
    pytest.importorskip("cryptography")
    with pytest.raises(ValueError, match="The provided `level` should be either `sample` or `chunk`"):
        cls("secret", level="file")


def test_writer_names_the_compression_before_looking_at_chunk_size(tmp_path: Path) -> None:
    # upstream's test_binary_writer_with_ints_and_chunk_bytes passes a dict where chunk_size goes
    with pytest.raises(ValueError, match="The provided compression something_else isn't available"):
        BinaryWriter(tmp_path, {"i": "int"}, compression="something_else")  # type: ignore[arg-type]
