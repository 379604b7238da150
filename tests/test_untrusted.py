"""Reading a dataset someone else made: pickled values are refused when asked, and chunk files
must be regular files inside the dataset (or cache) folder."""

from __future__ import annotations

import json
import os
import shutil
import struct
import warnings
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter, DatasetReader, Graph, PickleRefusedError, PickleWriteWarning
from litdata_format.internal import encode_chunk
from litdata_stream import StreamingDataLoader, StreamingDataset


class Payload:
    """Unpickling it creates the file ``path`` (as a hostile dataset could run any call)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> Any:
        # os.open returns an int, so the sample still collates.
        return (os.open, (self.path, os.O_CREAT | os.O_WRONLY, 0o600))


def _write(folder: Path, samples: list[Any], chunk_size: int = 2) -> Path:
    writer = BinaryWriter(folder, chunk_size=chunk_size)
    for i, sample in enumerate(samples):
        writer.add_item(i, sample)
    writer.done()
    writer.merge()
    return folder


def _hostile(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "marker"
    with pytest.warns(PickleWriteWarning, match=r"leaf \['payload'\] \(Payload\)"):
        data = _write(tmp_path / "data", [{"index": i, "payload": Payload(marker)} for i in range(6)])
    return data, marker


def test_writer_warns_once_per_writer(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _write(tmp_path / "d", [{"a": i, "b": {i}} for i in range(10)], chunk_size=3)
    pickled = [w for w in caught if issubclass(w.category, PickleWriteWarning)]
    assert len(pickled) == 1 and "['b'] (set)" in str(pickled[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no pickle, no warning
        _write(tmp_path / "clean", [{"a": i, "b": "x"} for i in range(3)])


def test_dataset_reader_refuses_then_allows(tmp_path: Path) -> None:
    data, marker = _hostile(tmp_path)
    with pytest.raises(PickleRefusedError) as err:
        DatasetReader(data, allow_pickle=False)
    message = str(err.value)
    for part in (
        "index.json",
        "['payload']",
        "'pickle'",
        "chunk-0-0.bin",
        "allow_pickle=True",
        "LITDATA_ALLOW_PICKLE=1",
    ):
        assert part in message
    assert not marker.exists()
    reader = DatasetReader(data, allow_pickle=True)
    assert isinstance(reader[0]["payload"], int) and marker.exists()


def test_env_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, marker = _hostile(tmp_path)
    monkeypatch.setenv("LITDATA_ALLOW_PICKLE", "0")
    with pytest.raises(PickleRefusedError, match="LITDATA_ALLOW_PICKLE=0"):
        DatasetReader(data)
    with pytest.raises(PickleRefusedError):
        StreamingDataset(data)
    assert DatasetReader(data, allow_pickle=True)[1]["index"] == 1  # the argument wins over the env
    monkeypatch.setenv("LITDATA_ALLOW_PICKLE", "maybe")
    with pytest.raises(ValueError, match="LITDATA_ALLOW_PICKLE='maybe'"):
        DatasetReader(data)
    os.unlink(marker)


def test_streaming_with_two_workers(tmp_path: Path) -> None:
    data, marker = _hostile(tmp_path)
    with pytest.raises(PickleRefusedError, match="chunk-0-0.bin"):
        StreamingDataset(data, allow_pickle=False)
    assert not marker.exists()
    refused = StreamingDataset(_write(tmp_path / "plain", [{"index": i} for i in range(4)]), allow_pickle=False)
    assert sorted(int(b["index"][0]) for b in StreamingDataLoader(refused, batch_size=1, num_workers=2)) == [0, 1, 2, 3]

    loader = StreamingDataLoader(StreamingDataset(data, allow_pickle=True), batch_size=2, num_workers=2)
    assert sorted(int(i) for batch in loader for i in batch["index"]) == list(range(6))
    assert marker.exists()


def test_pickled_graph_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with pytest.warns(PickleWriteWarning):
        data = _write(tmp_path / "g", [{"graph": Graph(data=Payload(marker))}])
    with pytest.raises(PickleRefusedError, match=r"leaf \['graph'\] is stored as 'graph:pickle'"):
        DatasetReader(data, allow_pickle=False)
    assert not marker.exists()
    DatasetReader(data, allow_pickle=True)[0]
    assert marker.exists()


def test_packed_graph_is_refused_too(tmp_path: Path) -> None:
    import torch

    with warnings.catch_warnings():  # torch_geometric warns about torch.jit on import
        warnings.simplefilter("ignore", FutureWarning)
        import torch_geometric.data  # noqa: F401 - reading gives a PyG Data

    # Its tensors are raw, but its layout (_meta) is a pickle, so it is refused as well.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PickleWriteWarning)
        data = _write(tmp_path / "g", [{"g": Graph(x=torch.ones(2, 3), edge_index=torch.tensor([[0], [1]]))}])
    with pytest.raises(PickleRefusedError, match=r"leaf \['g'\] is stored as 'graph'"):
        DatasetReader(data, allow_pickle=False)
    assert DatasetReader(data, allow_pickle=True)[0]["g"].x.shape == (2, 3)


def test_mds_pkl_column_is_refused(tmp_path: Path) -> None:
    import pickle

    marker = tmp_path / "marker"
    data = tmp_path / "mds"
    data.mkdir()
    payload = pickle.dumps(Payload(marker))
    shard = encode_chunk([struct.pack("<I", len(payload)) + payload])
    (data / "shard.00000.mds").write_bytes(shard)
    shard_info = {
        "column_encodings": ["pkl"], "column_names": ["obj"], "column_sizes": [None], "compression": None,
        "format": "mds", "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": len(shard), "hashes": {}},
        "samples": 1, "size_limit": 1 << 26, "version": 2, "zip_data": None,
    }  # fmt: skip
    (data / "index.json").write_text(json.dumps({"shards": [shard_info], "version": 2}))
    with pytest.raises(PickleRefusedError, match=r"column 'obj' is stored as 'pkl'.*shard.00000.mds"):
        StreamingDataset(data, allow_pickle=False)
    assert not marker.exists()
    assert isinstance(StreamingDataset(data, allow_pickle=True)[0]["obj"], int) and marker.exists()


def test_a_replaced_pickle_serializer_is_trusted(tmp_path: Path) -> None:
    from litdata_format import Serializer

    class Safe(Serializer):  # the user's own "pickle" reader, which does not unpickle
        def serialize(self, data: Any) -> tuple[bytes, str | None]:
            return b"", None

        def deserialize(self, data: Any) -> Any:
            return "refused"

        def can_serialize(self, data: Any) -> bool:
            return True

    data, marker = _hostile(tmp_path)
    reader = DatasetReader(data, serializers={"pickle": Safe()}, allow_pickle=False)
    assert reader[0]["payload"] == "refused" and not marker.exists()


# -- chunk paths ------------------------------------------------------------------------------


def _plain(tmp_path: Path) -> Path:
    return _write(tmp_path / "data", [{"index": i} for i in range(4)])


def _read_all(kind: str, data: Path, tmp_path: Path) -> Any:
    if kind == "reader":
        return list(DatasetReader(data))
    if kind == "local":
        return list(StreamingDataset(data))
    return list(StreamingDataset(f"local:{data}", cache_dir=str(tmp_path / "cache")))


@pytest.mark.parametrize("kind", ["reader", "local", "remote"])
def test_symlink_out_of_the_folder_is_refused(tmp_path: Path, kind: str) -> None:
    data = _plain(tmp_path)
    outside = tmp_path / "outside.bin"
    shutil.move(data / "chunk-0-0.bin", outside)
    os.symlink(outside, data / "chunk-0-0.bin")
    match = r"chunk-0-0.bin.* resolves to .*outside.bin, outside"
    if kind != "remote":  # through the cache, the copy is refused (no file reaches the cache)
        match = r"index.json: chunk " + match
    with pytest.raises(OSError if kind == "remote" else ValueError, match=match):
        _read_all(kind, data, tmp_path)
    assert not list((tmp_path / "cache").rglob("chunk-0-0.bin"))


def test_symlink_inside_the_folder_is_read(tmp_path: Path) -> None:
    data = _plain(tmp_path)
    (data / "store").mkdir()
    shutil.move(data / "chunk-0-0.bin", data / "store" / "c.bin")
    os.symlink(data / "store" / "c.bin", data / "chunk-0-0.bin")
    assert [s["index"] for s in DatasetReader(data)] == [0, 1, 2, 3]
    os.symlink(data, tmp_path / "linked")  # a dataset folder that is itself a link reads as well
    assert [s["index"] for s in StreamingDataset(tmp_path / "linked")] == [0, 1, 2, 3]


@pytest.mark.parametrize("kind", ["reader", "local", "remote"])
def test_dotdot_chunk_name_is_refused(tmp_path: Path, kind: str) -> None:
    data = _plain(tmp_path)
    shutil.copy(data / "chunk-0-0.bin", tmp_path / "chunk-0-0.bin")
    index = json.loads((data / "index.json").read_text())
    index["chunks"][0]["filename"] = "../chunk-0-0.bin"
    (data / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match=r"index.json: chunks\[0\]: chunk filename '../chunk-0-0.bin' is not"):
        _read_all(kind, data, tmp_path)


@pytest.mark.parametrize("kind", ["reader", "local", "remote"])
def test_fifo_chunk_is_refused_without_hanging(tmp_path: Path, kind: str) -> None:
    data = _plain(tmp_path)
    os.unlink(data / "chunk-0-0.bin")
    os.mkfifo(data / "chunk-0-0.bin")
    match = "chunk-0-0.bin.*not a regular file"
    with pytest.raises(OSError if kind == "remote" else ValueError, match=match):
        _read_all(kind, data, tmp_path)


def test_fifo_index_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "index.json")
    with pytest.raises(ValueError, match="index.json is not a regular file"):
        DatasetReader(tmp_path / "d")
