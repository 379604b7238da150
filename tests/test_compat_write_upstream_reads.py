"""Datasets written here are read by the real upstream litdata 0.2.76 with the same values."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import torch

from litdata_format import BinaryWriter, TokensLoader, load_index
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]

READ_ALL = """
import pickle, sys
from litdata import StreamingDataset
from litdata.streaming.item_loader import TokensLoader
from litdata.utilities.encryption import FernetEncryption, RSAEncryption
extra = sys.argv[3] if len(sys.argv) > 3 else ""
kwargs = {}
if extra.isdigit():
    kwargs["item_loader"] = TokensLoader(block_size=int(extra))
elif extra:
    kind, key_file = extra.split("=", 1)
    cls = FernetEncryption if kind == "fernet" else RSAEncryption
    kwargs["encryption"] = cls.load(key_file, "secret-pw")
ds = StreamingDataset(sys.argv[2], **kwargs)

def plain(value):  # upstream hands out memoryviews for bytes leaves; they do not pickle
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value

with open(sys.argv[1], "wb") as f:
    pickle.dump([plain(ds[i]) for i in range(len(ds))], f)
"""


def _dict_sample(i: int) -> dict[str, Any]:
    return {"index": i, "name": f"sample-{i}", "flag": i % 3 == 0, "x": i * 0.25, "raw": bytes(range(i % 7))}


def _arrays_sample(i: int) -> dict[str, Any]:
    return {
        "mat": np.arange(6, dtype=np.float32).reshape(2, 3) + i,
        "vec": np.arange(i + 1, dtype=np.int64),
        "img": np.full((4, 4), i, dtype=np.uint8),
    }


def _tensor_sample(i: int) -> dict[str, Any]:
    return {
        "t": torch.arange(4, dtype=torch.float32).reshape(2, 2) * i,
        "v": torch.arange(i + 1, dtype=torch.int32),
        "h": torch.ones(3, 1, dtype=torch.float16),
        "l": torch.tensor([i, -i], dtype=torch.int64),
    }


def _tuple_sample(i: int) -> tuple[int, str]:
    return (i, str(i))


def _nested_sample(i: int) -> dict[str, Any]:
    return {"a": [i, {"b": f"n{i}"}], "t": (i / 2, i)}


def _record(i: int) -> dict[str, Any]:
    """Arrow rows whose fields vary: list lengths, None vs str, nested dicts, bytes."""
    return {"id": i, "tags": ["t"] * (i % 4), "note": None if i % 3 else f"n{i}", "meta": {"k": i}, "raw": b"x" * i}


def _disagreeing(i: int) -> dict[str, Any]:
    """A field that is an int in some samples and a str in others: those chunks are stored as JSON."""
    return {"id": i, "value": i if i % 5 else f"v{i}"}


CASES: dict[str, tuple[Callable[[int], Any], dict[str, Any]]] = {
    "dict": (_dict_sample, {"chunk_size": 4}),
    "arrays": (_arrays_sample, {"chunk_bytes": 400}),
    "tensors": (_tensor_sample, {"chunk_size": 3}),
    "tuple": (_tuple_sample, {"chunk_size": 5}),
    "nested": (_nested_sample, {"chunk_size": 4}),
    "zstd": (_dict_sample, {"chunk_size": 4, "compression": "zstd"}),
    "zstd9": (_arrays_sample, {"chunk_size": 4, "compression": "zstd:9"}),
    # In-file zstd (upstream 0.2.76's default layout is "batch"): frames of runs of items, or one per item.
    "batch": (_arrays_sample, {"chunk_size": 5, "compression": "zstd", "compression_level": "batch"}),
    "batch_small_frames": (_tensor_sample, {"chunk_size": 5, "compression": "zstd:3", "compression_batch_size": 2}),
    "batch_dict": (_dict_sample, {"chunk_bytes": 300, "compression": "zstd", "compression_level": "batch"}),
    "batch_tuple": (_tuple_sample, {"chunk_size": 6, "compression": "zstd", "compression_batch_size": 4}),
    "sample_level": (_nested_sample, {"chunk_size": 4, "compression": "zstd:7", "compression_level": "sample"}),
    # Dicts of JSON-like values: Arrow rows, with any compression (it goes into the Arrow buffers).
    "rows": (_record, {"chunk_size": 5}),
    "rows_zstd": (_record, {"chunk_bytes": 200, "compression": "zstd:9"}),
    "rows_json_fallback": (_disagreeing, {"chunk_size": 3, "compression": "zstd", "compression_level": "batch"}),
}


ARROW_ROWS_CASES = {"dict", "zstd", "batch_dict", "rows", "rows_zstd"}


def _assert_same(expected: Any, got: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected), where
        for key in expected:
            _assert_same(expected[key], got[key], f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), where
        for k, (a, b) in enumerate(zip(expected, got)):
            _assert_same(a, b, f"{where}[{k}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype, where
        np.testing.assert_array_equal(got, expected)
    elif isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == expected.dtype, where
        assert torch.equal(got, expected), where
    else:
        assert got == expected and type(got) is type(expected), where


def _write(path: Path, samples: list[Any], **options: Any) -> None:
    writer = BinaryWriter(path, **options)
    for i, sample in enumerate(samples):
        writer.add_item(i, sample)
    writer.done()
    writer.merge()


# Some cases put a sample bigger than chunk_bytes alone in its chunk on purpose (the writer warns, as upstream's does).
@pytest.mark.filterwarnings("ignore:An item was larger than the target chunk size")
@pytest.mark.parametrize("case", sorted(CASES))
def test_upstream_reads_our_dataset(tmp_path: Path, case: str) -> None:
    make, options = CASES[case]
    samples = [make(i) for i in range(11)]
    _write(tmp_path / "ds", samples, **options)
    # Upstream ignores the chunk entries' checksum fields (and reads everything else the same).
    for info in load_index(tmp_path / "ds").chunks:
        assert info.extra["checksum"].startswith("xxh3_64:")
        assert ("plain_checksum" in info.extra) == (".zstd" in info.filename)  # whole-file compressed
    layouts = {
        (tmp_path / "ds" / c.filename).read_bytes().endswith(b"LDARW01\x00") for c in load_index(tmp_path / "ds").chunks
    }
    assert layouts == ({True, False} if case == "rows_json_fallback" else {case in ARROW_ROWS_CASES})
    got = run_upstream(READ_ALL, str(tmp_path / "ds"))
    assert len(got) == len(samples)
    for i, (expected, value) in enumerate(zip(samples, got)):
        _assert_same(expected, value, f"sample {i}")


@pytest.mark.parametrize(("kind", "level"), [("fernet", "sample"), ("fernet", "chunk"), ("rsa", "sample")])
def test_upstream_reads_our_encrypted_dataset(tmp_path: Path, kind: str, level: Literal["sample", "chunk"]) -> None:
    from litdata_format import FernetEncryption, RSAEncryption

    encryption = (FernetEncryption if kind == "fernet" else RSAEncryption)("secret-pw", level=level)
    samples = [{"index": i, "name": f"n{i}"} if kind == "rsa" else _arrays_sample(i) for i in range(7)]
    _write(
        tmp_path / "ds", samples, chunk_size=3, encryption=encryption, compression="zstd" if level == "chunk" else None
    )
    encryption.save(str(tmp_path / "key.json"))
    got = run_upstream(READ_ALL, str(tmp_path / "ds"), f"{kind}={tmp_path / 'key.json'}")
    assert len(got) == len(samples)
    for i, (expected, value) in enumerate(zip(samples, got)):
        _assert_same(expected, value, f"sample {i}")


def test_upstream_reads_our_media_leaves(tmp_path: Path) -> None:
    from litdata_format import Graph, JsonLeaf, Text

    samples = [
        {
            "text": Text(text=f"caption {i}"),
            "meta": JsonLeaf({"tags": ["a", str(i)], "score": i / 4}),
            "graph": Graph(x=torch.ones(3, 2) * i, edge_index=torch.tensor([[0, 1], [1, 2]])),
        }
        for i in range(5)
    ]
    _write(tmp_path / "ds", samples, chunk_size=2)
    got = run_upstream(
        READ_ALL.replace("pickle.dump([plain(ds[i])", "pickle.dump([plain(summary(ds[i]))").replace(
            "with open(sys.argv[1]",
            "def summary(s):\n    g = s['graph']\n"
            "    return {'text': s['text'], 'meta': s['meta'], 'x': g.x, 'edge_index': g.edge_index}\n\n"
            "with open(sys.argv[1]",
        ),
        str(tmp_path / "ds"),
    )
    for i, value in enumerate(got):
        assert value["text"] == f"caption {i}"
        assert value["meta"] == {"tags": ["a", str(i)], "score": i / 4}
        assert torch.equal(value["x"], torch.ones(3, 2) * i)
        assert torch.equal(value["edge_index"], torch.tensor([[0, 1], [1, 2]]))


def test_upstream_reads_our_tokens(tmp_path: Path) -> None:
    streams = [torch.arange(i * 100, i * 100 + 10 + i, dtype=torch.int32) for i in range(8)]
    _write(tmp_path / "ds", streams, chunk_size=40, item_loader=TokensLoader())
    got = run_upstream(READ_ALL, str(tmp_path / "ds"), "8")
    flat = torch.cat(streams)
    # Blocks never straddle chunks: rebuild what a reader must see, chunk by chunk.
    from litdata_format import DatasetReader

    ours = DatasetReader(tmp_path / "ds", item_loader=TokensLoader(block_size=8))
    assert len(got) == len(ours) > 0
    for i, block in enumerate(got):
        assert torch.equal(block, ours[i]), f"block {i}"
    assert torch.equal(got[0], flat[:8])


def test_upstream_reads_our_registered_namedtuples_and_defaultdicts(tmp_path: Path) -> None:
    import collections

    from litdata_format import register_namedtuple

    pair = collections.namedtuple("Pair", ["left", "right"])
    register_namedtuple(pair, "compat.Pair")
    samples = [{"p": pair(i, str(i)), "d": collections.defaultdict(list, k=[i])} for i in range(5)]
    _write(tmp_path / "ds", samples, chunk_size=2)
    script = (
        READ_ALL.replace(
            "ds = StreamingDataset(",
            "import collections\nfrom litdata.utilities._pytree import _register_namedtuple\n"
            "Pair = collections.namedtuple('Pair', ['left', 'right'])\n"
            "_register_namedtuple(Pair, serialized_type_name='compat.Pair')\n"
            "ds = StreamingDataset(",
        )
        .replace("pickle.dump([plain(ds[i])", "pickle.dump([summary(ds[i])")
        .replace(
            "with open(sys.argv[1]",
            "def summary(s):\n"
            "    return (type(s['p']).__name__, tuple(s['p']), s['d'].default_factory.__name__, dict(s['d']))\n\n"
            "with open(sys.argv[1]",
        )
    )
    got = run_upstream(script, str(tmp_path / "ds"))
    assert got == [("Pair", (i, str(i)), "list", {"k": [i]}) for i in range(5)]


def test_bytes_and_a_list_of_ints_and_floats(tmp_path: Path) -> None:
    """A dict holding bytes plus a list mixing ints and floats (upstream writes and reads it): optimize
    takes it, both libraries read it back with the ints still ints."""
    from litdata_prep import optimize
    from litdata_stream import StreamingDataset
    from tests.support import prep_e2e_fns as fns

    out = tmp_path / "ds"
    optimize(fn=fns.bytes_and_mixed_list, inputs=list(range(7)), output_dir=str(out), chunk_size=3, num_workers=2,
             start_method="fork", verbose=False)  # fmt: skip
    expected = [fns.bytes_and_mixed_list(i) for i in range(7)]
    got = list(StreamingDataset(str(out)))
    assert got == expected
    assert [[type(v) for v in s["l"]] for s in got] == [[type(v) for v in s["l"]] for s in expected]
    assert run_upstream(READ_ALL, str(out)) == expected


def _flat_record(i: int) -> dict[str, Any]:
    """Flat rows (no list or dict): written a record batch of 256 at a time as they come."""
    note = None if i % 4 else "é" * (i % 7)
    return {"image": bytes([i % 251]) * (i % 37), "label": i, "note": note, "ok": i % 2 == 0}


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_upstream_reads_rows_written_batch_by_batch(tmp_path: Path, compression: str | None) -> None:
    samples = [_flat_record(i) for i in range(700)]
    _write(tmp_path / "ds", samples, chunk_size=600, compression=compression)  # 600 rows (2 batches + 88), then 100
    chunks = load_index(tmp_path / "ds").chunks
    assert [c.chunk_size for c in chunks] == [600, 100]
    assert all((tmp_path / "ds" / c.filename).read_bytes().endswith(b"LDARW01\x00") for c in chunks)
    assert run_upstream(READ_ALL, str(tmp_path / "ds")) == samples


def test_we_read_a_zstd_folder_upstream_has_read(tmp_path: Path) -> None:
    """Upstream, reading our local zstd dataset, swaps each ``chunk-*.zstd.bin`` for its decompressed ``.bin``."""
    from litdata import StreamingDataLoader, StreamingDataset
    from litdata_format import ChecksumError

    folder = tmp_path / "ds"
    samples = [_arrays_sample(i) for i in range(11)]
    _write(folder, samples, chunk_size=4, compression="zstd")
    index_before = (folder / "index.json").read_bytes()
    got = run_upstream(READ_ALL, str(folder))  # upstream really reads the folder first
    assert len(got) == len(samples)
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["chunk-0-0.bin", "chunk-0-1.bin", "chunk-0-2.bin", "index.json"], names  # what upstream left
    assert (folder / "index.json").read_bytes() == index_before

    dataset = StreamingDataset(str(folder))
    assert len(dataset) == len(samples)
    for i, expected in enumerate(samples):
        _assert_same(expected, dataset[i], f"sample {i}")
    verified = StreamingDataset(str(folder), verify_chunks=True, shuffle=False)
    assert sorted(int(s["vec"][-1]) for s in verified) == list(range(11))
    loader = StreamingDataLoader(StreamingDataset(str(folder)), batch_size=4, num_workers=1, collate_fn=list)
    assert sum(len(batch) for batch in loader) == 11  # in a worker process too

    # The sibling must be the very bytes the compressed chunk held (index.json's plain_checksum).
    damaged = bytearray((folder / "chunk-0-1.bin").read_bytes())
    damaged[-1] ^= 0xFF
    (folder / "chunk-0-1.bin").write_bytes(bytes(damaged))
    with pytest.raises(ChecksumError, match=r"chunk-0-1\.zstd\.bin.*decompressed sibling chunk-0-1\.bin"):
        StreamingDataset(str(folder))[5]
