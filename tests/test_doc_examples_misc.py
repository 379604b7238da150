"""Upstream's doc examples for JPEG images, complete_dataset, parquet tokenizing, multi-node and
Lightning Studio paths, RSA encryption and the tracer, on local folders.

Adapted only in: paths (``/teamspace/...`` Lightning Studio folders become local ones; the
Studio path itself is shown to fail with a clear error), worker counts and sizes.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from PIL import Image as PILImage

import litdata as ld
from litdata import StreamingDataset, optimize
from litdata_format import BinaryWriter, load_index
from tests.support import doc_example_fns, prep_e2e_fns
from tests.support.prep_e2e_fns import Tokenizer

pytestmark = pytest.mark.slow


def test_optimize_images_as_jpeg(tmp_path: Path) -> None:
    list_of_paths = []
    for i in range(6):
        path = tmp_path / f"{i}.{'png' if i % 2 else 'jpg'}"  # a folder mixing png and jpg files
        PILImage.fromarray(np.full((20, 30, 3), 40 * i, dtype=np.uint8)).save(path)
        list_of_paths.append(str(path))
    fast_data = str(tmp_path / "fast_data")
    ld.optimize(fn=doc_example_fns.load_image, inputs=list_of_paths, output_dir=fast_data, chunk_bytes="64MB",
                num_workers=2)  # fmt: skip
    dataset = StreamingDataset(fast_data)
    assert len(dataset) == 6 and all(tuple(s["image"].shape) == (3, 20, 30) for s in dataset)  # decoded JPEG
    # The sample wraps its media in Image(...), so its plain string "id" is text, the path it names.
    assert sorted(s["id"] for s in dataset) == sorted(list_of_paths)
    config = json.loads((Path(fast_data) / "index.json").read_text())["config"]
    assert config["data_format"] == ["image:jpg", "str"]


def test_optimize_image_paths_of_mixed_formats(tmp_path: Path) -> None:
    """``Image(path=...)`` keeps each file as it is: png and jpg files of one folder go in one dataset."""
    list_of_paths = []
    for i in range(6):
        path = tmp_path / f"{i}.{'png' if i % 2 else 'jpg'}"
        PILImage.fromarray(np.full((20, 30, 3), 40 * i, dtype=np.uint8)).save(path)
        list_of_paths.append(str(path))
    out = str(tmp_path / "as_is")
    ld.optimize(fn=doc_example_fns.load_image_as_is, inputs=list_of_paths, output_dir=out, chunk_bytes="64MB",
                num_workers=1)  # fmt: skip
    samples = sorted(StreamingDataset(out), key=lambda s: s["id"])
    assert [s["id"] for s in samples] == sorted(list_of_paths)
    # png bytes stored under the first sample's image:jpg still decode (by the file's own header).
    assert all(tuple(sample["image"].shape) == (3, 20, 30) for sample in samples)
    assert torch.equal(samples[1]["image"], torch.from_numpy(np.full((3, 20, 30), 40, dtype=np.uint8)))


def test_complete_dataset_from_rank_indexes(tmp_path: Path) -> None:
    from litdata import StreamingDataset, complete_dataset

    def write_shards(folder: Path) -> str:
        for rank in range(2):
            writer = BinaryWriter(folder, chunk_size=4, rank=rank)
            for i in range(10):
                writer.add_item(i, {"rank": rank, "i": i})
            writer.done()  # writes {rank}.index.json only
        assert not (folder / "index.json").exists()
        return str(folder)

    my_chunks = write_shards(tmp_path / "my_chunks")
    complete_dataset(my_chunks)  # no-op if index.json already exists
    assert (tmp_path / "my_chunks" / "index.json").is_file() and len(StreamingDataset(my_chunks)) == 20
    complete_dataset(my_chunks)  # the no-op
    assert len(StreamingDataset(my_chunks)) == 20

    shards_only = write_shards(tmp_path / "shards_only")
    StreamingDataset(shards_only)  # also tries this automatically
    assert sorted((s["rank"], s["i"]) for s in StreamingDataset(shards_only)) == [
        (r, i) for r in range(2) for i in range(10)
    ]


def test_tokenize_large_parquet_files(tmp_path: Path) -> None:
    from litdata import optimize

    input_dir = tmp_path / "tinyllama-template"  # /teamspace/s3_connections/tinyllama-template in the docs
    (input_dir / "starcoderdata").mkdir(parents=True)
    for f in range(2):
        pq.write_table(pa.table({"content": [f"def f{f}_{i}(): pass" for i in range(30)]}),
                       input_dir / "starcoderdata" / f"part-{f}.parquet", row_group_size=7)  # fmt: skip
    inputs = [str(file) for file in Path(f"{input_dir}/starcoderdata").rglob("*.parquet")]

    # 3. Store the optimized data wherever you want (/teamspace/datasets/starcoderdata in the docs)
    outputs = optimize(
        fn=partial(doc_example_fns.tokenize_fn, tokenizer=Tokenizer()),  # Note: Use HF tokenizer or any others
        inputs=inputs,
        output_dir=str(tmp_path / "starcoderdata"),
        chunk_size=(2049 * 8012),  # Number of tokens to store by chunks. This is roughly 64MB of tokens per chunk.
        num_workers=2,
    )
    del outputs
    dataset = StreamingDataset(str(tmp_path / "starcoderdata"))
    expected = sorted(tuple(Tokenizer().encode(f"def f{f}_{i}(): pass")) for f in range(2) for i in range(30))
    assert sorted(tuple(np.asarray(s).tolist()) for s in dataset) == expected


def test_multi_node_outside_a_studio_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_nodes=32 was given, but no Ray cluster is named.*ray start --head"):
        optimize(
            fn=prep_e2e_fns.compress,
            inputs=list(range(100)),
            num_workers=8,  # processes per machine
            output_dir=str(tmp_path / "optimized-v1"),  # /teamspace/s3_connections/my-data/optimized-v1
            chunk_bytes="64MB",
            num_nodes=32,  # machines in the job
        )
    assert not (tmp_path / "optimized-v1").exists()


def test_studio_paths_adapted_to_local_folders(tmp_path: Path) -> None:
    from litdata import StreamingDataset, StreamingRawDataset, optimize

    with pytest.raises(ValueError, match="Lightning Studio"):
        StreamingDataset("/teamspace/s3_connections/my-data-1/fast_data", shuffle=True, drop_last=True)

    connection = tmp_path / "s3_connections"  # /teamspace/s3_connections in the docs
    (connection / "my-bucket-1/raw").mkdir(parents=True)
    (connection / "my-bucket-1/raw/a.txt").write_text("raw file")

    # Stream raw files from a connection
    raw = StreamingRawDataset(str(connection / "my-bucket-1/raw"), cache_dir=str(tmp_path / "cache"))
    assert raw[0] == b"raw file"

    # Optimize *into* a connection — chunks upload straight to the bucket
    optimize(
        fn=prep_e2e_fns.keep_even,  # the docs' should_keep: yields data when it is even
        inputs=list(range(1000)),
        output_dir=str(connection / "my-data-1/output"),
        chunk_bytes="64MB",
        num_workers=1,
    )
    dataset = StreamingDataset(str(connection / "my-data-1/output"), shuffle=True, drop_last=True)
    assert sorted(dataset) == list(range(0, 1000, 2))


def test_rsa_encryption(tmp_path: Path) -> None:
    from litdata.utilities.encryption import RSAEncryption

    data_dir = str(tmp_path / "optimized_data")
    rsa = RSAEncryption(password="your_secure_password", level="sample")  # or "chunk"
    optimize(fn=prep_e2e_fns.value_fn, inputs=list(range(5)), output_dir=data_dir, chunk_bytes="64MB",
             encryption=rsa, num_workers=1)  # fmt: skip
    rsa.save(str(tmp_path / "rsa.pem"))

    rsa = RSAEncryption.load(str(tmp_path / "rsa.pem"), password="your_secure_password")
    ds = StreamingDataset(input_dir=data_dir, encryption=rsa)
    assert ds[:] == [{"index": i, "value": i**2} for i in range(5)]
    assert b"value" not in b"".join(p.read_bytes() for p in Path(data_dir).glob("*.bin"))


def test_tracer_and_litracer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    writer = BinaryWriter(tmp_path / "my-data", chunk_size=16)
    for i in range(256):
        writer.add_item(i, i)
    writer.done()
    writer.merge()
    script = tmp_path / "train.py"
    script.write_text(
        "import litdata as ld\n"
        "from litdata.debugger import enable_tracer\n\n"
        "# Call once per process, before the DataLoader. Delete an existing log before re-tracing (append).\n"
        'enable_tracer(level="chunk", log_file="litdata_debug.log")\n\n'
        'if __name__ == "__main__":\n'
        '    dataset = ld.StreamingDataset("my-data", shuffle=True)\n'
        "    for batch in ld.StreamingDataLoader(dataset, batch_size=64, num_workers=2):\n"
        "        ...\n"
    )
    subprocess.run([sys.executable, str(script)], check=True, cwd=tmp_path)  # python train.py
    log = (tmp_path / "litdata_debug.log").read_text()
    assert "read" in log and len(log.splitlines()) > 16

    litracer = [sys.executable, "-m", "litracer"]
    subprocess.run([*litracer, "--quiet", "--validate", "-o", "litdata_trace.json.gz", "litdata_debug.log"],
                   check=True, cwd=tmp_path)  # fmt: skip
    subprocess.run([*litracer, "--quiet", "--cat", "download,read,delete", "-o", "io.json.gz", "litdata_debug.log"],
                   check=True, cwd=tmp_path)  # fmt: skip
    for name in ("litdata_trace.json.gz", "io.json.gz"):
        trace = json.loads(gzip.decompress((tmp_path / name).read_bytes()))
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        assert any(e.get("name") == "read" for e in events)
    assert load_index(str(tmp_path / "my-data")).chunks


class _F:
    """Stands in for ``torchvision.transforms.v2.functional`` (torchvision is not installed here)."""

    @staticmethod
    def resize(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        return torch.nn.functional.interpolate(image[None].float(), size=size)[0]


def test_subclass_getitem(tmp_path: Path) -> None:
    from litdata import StreamingDataLoader, StreamingDataset

    F = _F
    writer = BinaryWriter(tmp_path / "imagenet", chunk_size=8)
    for i in range(10):
        writer.add_item(i, torch.full((3, 32 + i, 40), i, dtype=torch.uint8))
    writer.done()
    writer.merge()

    class ImagenetStreamingDataset(StreamingDataset):
        def __getitem__(self, index):
            image = super().__getitem__(index)
            return F.resize(image, (224, 224))

    dataset = ImagenetStreamingDataset(str(tmp_path / "imagenet"))
    dataloader = StreamingDataLoader(dataset, batch_size=4)

    shapes = []
    for batch in dataloader:
        print(batch.shape)
        # Out: (4, 3, 224, 224)
        shapes.append(tuple(batch.shape))
    assert shapes == [(4, 3, 224, 224), (4, 3, 224, 224), (2, 3, 224, 224)]
