"""An index.json rewritten by an attacker next to real chunks never makes a reader import or call a name.

Each case writes a real dataset whose one leaf is a string an attacker controls, then rewrites the
``data_spec`` of its ``index.json`` by hand to name a callable (``builtins.exec``, ``os.system``) as
a namedtuple class, or a module whose import has a side effect. Both readers (litdata_format's
``DatasetReader`` and ``StreamingDataset``) must refuse the index with an error naming index.json
and the type, and the marker file the payload would create must not exist. A namedtuple that was
registered still reads, in the loader's worker processes too.
"""

from __future__ import annotations

import collections
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter, DatasetReader, register_namedtuple
from litdata_stream import StreamingDataLoader, StreamingDataset

Point = collections.namedtuple("Point", ["x", "name"])
register_namedtuple(Point, "tests.hostile_index.Point")  # at import: spawned loader workers register it too

_LEAF = {"type": None, "context": None, "children_spec": []}

# The module an attacker hopes a reader imports: importing it creates the marker.
_EVIL_MODULE = "import pathlib, os\npathlib.Path(os.environ['LITDATA_TEST_MARKER']).touch()\nThing = exec\n"


def _namedtuple(name: str) -> dict[str, Any]:
    return {"type": "collections.namedtuple", "context": name, "children_spec": [_LEAF]}


def _old_torch_namedtuple(name: str) -> dict[str, Any]:
    return {"type": name, "context": name, "children_spec": [_LEAF]}


def _defaultdict(module: str, name: str) -> dict[str, Any]:
    context = {"default_factory_module": module, "default_factory_name": name, "dict_context": ["k"]}
    return {"type": "collections.defaultdict", "context": context, "children_spec": [_LEAF]}


CASES: dict[str, tuple[Callable[[Path], str], dict[str, Any], str]] = {
    # case: (the string leaf, from the marker path), the data_spec node, the type the error must name
    "exec": (lambda m: f"open({str(m)!r}, 'w').close()", _namedtuple("builtins.exec"), "builtins.exec"),
    "exec-old-spelling": (
        lambda m: f"open({str(m)!r}, 'w').close()",
        _old_torch_namedtuple("builtins.exec"),
        "builtins.exec",
    ),
    "os.system": (lambda m: f"touch {m}", _namedtuple("os.system"), "os.system"),
    "import-side-effect": (lambda m: "x", _namedtuple("litdata_evil_mod.Thing"), "litdata_evil_mod.Thing"),
    "defaultdict-import": (lambda m: "x", _defaultdict("litdata_evil_mod", "Thing"), "litdata_evil_mod.Thing"),
    "defaultdict-system": (lambda m: "x", _defaultdict("os", "system"), "os.system"),
}


def _hostile_dataset(root: Path, case: str) -> tuple[Path, Path]:
    payload, node, _ = CASES[case]
    marker = root / "marker"
    data = root / "data"
    writer = BinaryWriter(data, chunk_size=2)
    for _ in range(3):
        writer.write((payload(marker),))
    writer.done()
    writer.merge()
    index_file = data / "index.json"
    index = json.loads(index_file.read_text())
    assert index["config"]["data_format"] == ["str"]
    index["config"]["data_spec"] = json.dumps([1, node])
    index_file.write_text(json.dumps(index))
    return data, marker


@pytest.fixture
def evil_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "litdata_evil_mod.py").write_text(_EVIL_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("LITDATA_TEST_MARKER", str(tmp_path / "marker"))
    monkeypatch.setenv("LITDATA_CACHE_DIR", str(tmp_path / "cache"))
    return folder


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("reader", ["DatasetReader", "StreamingDataset"])
def test_a_hostile_data_spec_runs_nothing(tmp_path: Path, evil_module: Path, case: str, reader: str) -> None:
    data, marker = _hostile_dataset(tmp_path, case)
    type_name = CASES[case][2]
    with pytest.raises(ValueError) as caught:
        if reader == "DatasetReader":
            DatasetReader(data)[0]
        else:
            StreamingDataset(str(data))[0]
    message = str(caught.value)
    assert "index.json" in message and repr(type_name) in message, message
    if "defaultdict" not in case:
        assert "register_namedtuple" in message, message
    assert not marker.exists()
    assert "litdata_evil_mod" not in sys.modules


def test_the_same_dataset_reads_with_its_real_spec(tmp_path: Path, evil_module: Path) -> None:
    """The cases above fail because of the spec alone: the chunks they sit next to are sound."""
    writer = BinaryWriter(tmp_path / "data", chunk_size=2)
    for i in range(3):
        writer.write((f"s{i}",))
    writer.done()
    writer.merge()
    assert [DatasetReader(tmp_path / "data")[i] for i in range(3)] == [("s0",), ("s1",), ("s2",)]
    assert StreamingDataset(str(tmp_path / "data"))[2] == ("s2",)


def _first(batch: list[Any]) -> Any:
    return batch[0]  # the sample as the worker rebuilt it (default collation would turn it into tensors)


@pytest.mark.parametrize("context", ["spawn", "fork"])
def test_a_registered_namedtuple_streams_through_loader_workers(
    tmp_path: Path, context: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))  # spawned workers import this module
    writer = BinaryWriter(tmp_path / "data", chunk_size=3)
    for i in range(8):
        writer.write({"p": Point(i, f"p{i}")})
    writer.done()
    writer.merge()
    dataset = StreamingDataset(str(tmp_path / "data"), cache_dir=str(tmp_path / "cache"))
    loader = StreamingDataLoader(
        dataset, batch_size=1, num_workers=2, multiprocessing_context=context, collate_fn=_first
    )
    got = sorted((sample["p"] for sample in loader), key=lambda p: p.x)
    assert got == [Point(i, f"p{i}") for i in range(8)] and all(type(p) is Point for p in got)


@pytest.mark.parametrize("key", ["chunk_size", "dim", "chunk_bytes"])
def test_counts_summing_past_int64_fail_naming_the_index_and_the_field(tmp_path: Path, key: str) -> None:
    """Each entry within its bound (2**48), 2**15 + 1 of them: the old reader's ``len()`` gave a bare OverflowError."""
    writer = BinaryWriter(tmp_path / "data", chunk_size=2)
    for i in range(4):
        writer.write((f"s{i}",))
    writer.done()
    writer.merge()
    index_file = tmp_path / "data" / "index.json"
    index = json.loads(index_file.read_text())
    index["chunks"] = [{**index["chunks"][0], key: 2**48} for _ in range(2**15 + 1)]
    index_file.write_text(json.dumps(index))
    with pytest.raises(ValueError, match=rf"index\.json: the chunks' '{key}' values add up past 2\*\*63 - 1 at chunks"):
        dataset = StreamingDataset(str(tmp_path / "data"))
        len(dataset)


_CLAIMS = """
import resource, sys
from litdata_stream import StreamingDataLoader, StreamingDataset
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))  # the 7.45 GiB the claim asked for fails here
dataset = StreamingDataset(sys.argv[1], cache_dir=sys.argv[2], shuffle=sys.argv[3] == "shuffle")
workers = int(sys.argv[4])
try:
    # A loop, not list(): list() would size itself by len(), which the claim makes 10**9.
    for _ in StreamingDataLoader(dataset, batch_size=2, num_workers=workers) if workers else dataset:
        pass
except Exception as err:
    print(f"{type(err).__name__}: {err}")
"""


@pytest.mark.parametrize(("shuffle", "workers"), [("plain", 0), ("shuffle", 0), ("shuffle", 1)])
def test_a_chunk_claiming_a_billion_items_fails_naming_it(tmp_path: Path, shuffle: str, workers: int) -> None:
    """Its count is checked against the chunk's header before the order of its items is allocated."""
    import subprocess

    writer = BinaryWriter(tmp_path / "data", chunk_size=2)
    for i in range(4):
        writer.write({"i": i})
    writer.done()
    writer.merge()
    index_file = tmp_path / "data" / "index.json"
    index = json.loads(index_file.read_text())
    index["chunks"][1]["chunk_size"] = 10**9
    index_file.write_text(json.dumps(index))
    for url in (str(tmp_path / "data"), f"local:{tmp_path / 'data'}"):  # read in place, and through the cache
        done = subprocess.run(
            [sys.executable, "-c", _CLAIMS, url, str(tmp_path / "cache"), shuffle, str(workers)],
            capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        assert done.stdout.startswith("ValueError: "), done.stdout
        assert re.search(r"chunk \S*chunk-0-1\.bin: holds 2 items but index\.json says 1000000000", done.stdout)


def _lengthen(state: Any) -> Any:
    """``state`` with every list a million long (what a hostile checkpoint file can hold)."""
    if isinstance(state, dict):
        return {key: _lengthen(value) for key, value in state.items()}
    if isinstance(state, list):
        return [0] * 10**6
    return state


def _small(tmp_path: Path) -> Path:
    writer = BinaryWriter(tmp_path / "data", chunk_size=2)
    for i in range(8):
        writer.write({"i": i})
    writer.done()
    writer.merge()
    return tmp_path / "data"


def test_a_hostile_state_dict_fails_naming_the_field(tmp_path: Path) -> None:
    data = _small(tmp_path)
    loader = StreamingDataLoader(StreamingDataset(str(data)), batch_size=2, num_workers=2)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    del batches
    hostile = StreamingDataLoader(StreamingDataset(str(data)), batch_size=2, num_workers=2)
    with pytest.raises(ValueError, match=r"state dict field '(topology|base)' must be .*got a list of 1000000"):
        hostile.load_state_dict(_lengthen(state))
    for field, value, should in (
        ("base", [[0, 1]] * 10**6, "a list of .start, end. pairs"),
        ("base", [[0, 9]], "a list of .start, end. pairs of positions from 0 to 8"),
        ("base", [[1, "x"]], "a list of .start, end. pairs"),
        ("topology", [1, 2, 2], r"\[world_size, num_workers, batch_size, drop_last\]"),
        ("topology", [10**6, 10**6, 2, False], r".*\(at most 1048576 ranks times workers\)"),
        ("batches", "x", "an int from 0 to 8"),
        ("first_worker", 2, "an int from 0 to 1"),
        ("epoch", None, "an int from 0"),
    ):
        dataset = StreamingDataset(str(data))
        with pytest.raises(ValueError, match=rf"StreamingDataset\(.*\): state dict field '{field}' must be {should}"):
            dataset.load_state_dict({**state["dataset"], field: value})
    resumed = StreamingDataLoader(StreamingDataset(str(data)), batch_size=2, num_workers=2)
    resumed.load_state_dict(state)  # the real one still resumes
    assert sorted(int(i) for batch in resumed for i in batch["i"]) == list(range(2, 8))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{{"chunks": {a}, "config": {c}, "chunks": {b}}}', "chunks"),  # the writers' layout: read in windows
        ('{{"config": {c}, "chunks": {a}, "config": {c2}}}', "config"),  # another layout: parsed whole
        ('{{"chunks": {a}, "config": {cd}}}', "compression"),  # inside config
    ],
)
def test_an_index_with_a_key_twice_is_refused(tmp_path: Path, text: str, key: str) -> None:
    first, second = _small(tmp_path / "a"), _small(tmp_path / "b")
    a, b = (json.loads((folder / "index.json").read_text()) for folder in (first, second))
    b_chunks = [{**entry, "filename": f"b-{entry['filename']}"} for entry in b["chunks"]]
    config = json.dumps(a["config"])
    joined = text.format(
        a=json.dumps(a["chunks"]), b=json.dumps(b_chunks)[:0] + json.dumps(a["chunks"]), c=config,
        c2=json.dumps({**a["config"], "compression": "zstd"}),
        cd=config[:-1] + ', "compression": "zstd"}',
    )  # fmt: skip
    (first / "index.json").write_text(joined)
    for read in (DatasetReader, StreamingDataset):
        with pytest.raises(ValueError, match=rf"index.json has the key '{key}' twice in one object"):
            read(str(first))


def test_a_hostile_combined_state_dict_fails_naming_the_field(tmp_path: Path) -> None:
    from litdata_stream import CombinedStreamingDataset

    folders = [_small(tmp_path / name) for name in ("a", "b")]

    def combined() -> CombinedStreamingDataset:
        return CombinedStreamingDataset([StreamingDataset(str(f)) for f in folders], iterate_over_all=True, seed=1)

    loader = StreamingDataLoader(combined(), batch_size=2, num_workers=1)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    del batches
    hostile = {**state, "dataset": _lengthen(state["dataset"])}
    refused = r"CombinedStreamingDataset.*: state dict field '\w+' must be .*list of 1000000"
    with pytest.raises(ValueError, match=refused):
        StreamingDataLoader(combined(), batch_size=2, num_workers=1).load_state_dict(hostile)
    sub = state["dataset"]["datasets"]["1"]
    bad = {**state["dataset"], "datasets": {**state["dataset"]["datasets"], "1": {**sub, "base": [[0, 1]] * 10**6}}}
    with pytest.raises(ValueError, match=r"CombinedStreamingDataset datasets\[1\]: .*state dict field 'base' must be"):
        combined().load_state_dict(bad)


def test_a_hostile_upstream_state_dict_fails_naming_the_field(tmp_path: Path) -> None:
    """Upstream LitData's layout (no 'base'): read by its own path, with the same checks."""
    data = _small(tmp_path)
    state = {"input_dir_path": str(data), "current_epoch": 1, "num_samples_yielded": 2, "num_workers": 2,
             "batch_size": 2, "world_size": 1, "shuffle": False, "seed": 42, "drop_last": False}  # fmt: skip
    for field, value, match in (
        ("region_of_interest", [[0, 2]] * 10**6, "its region_of_interest does not cover"),
        ("region_of_interest", [0] * 4, "its region_of_interest does not cover"),
        ("world_size", [1] * 10**6, "state dict field 'world_size' must be an int from 1 to 1048576"),
        ("num_workers", 10**7, "state dict field 'num_workers' must be an int from 0 to 1048576"),
        ("num_samples_yielded", "2", "state dict field 'num_samples_yielded' must be an int"),
    ):
        with pytest.raises(ValueError, match=match):
            StreamingDataset(str(data)).load_state_dict({**state, field: value})
    resumed = StreamingDataLoader(StreamingDataset(str(data)), batch_size=2, num_workers=2)
    resumed.load_state_dict({"dataset": state, "current_epoch": 1, "num_samples_yielded": 2, "latest_worker_idx": 0})
    assert len([int(i) for batch in resumed for i in batch["i"]]) == 6  # the real one resumes
