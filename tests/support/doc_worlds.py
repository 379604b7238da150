"""How an upstream docs example runs as a user runs it, and the inputs it reads, made before it runs.

:func:`run_example` runs an example's script in a fresh interpreter, or forked from the test zygote
when its import lines load torch (see ``tests/test_doc_examples_as_written.py``); :class:`World` is
where an example's inputs are made (its working folder and the local servers); :data:`SETUPS` makes
them, by the name ``tests/support/doc_examples.py`` gives each example's ``setup``.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from litdata_format import BinaryWriter
from litdata_io import get_storage
from tests.support.servers import S3Server
from tests.support.servers_extra import AzuriteServer, FakeGcsServer, HfHubServer
from tests.support.zygote import run_python

_REPO = Path(__file__).resolve().parents[2]
# Written by MosaicML Streaming 0.13.0: int, pil, bytes and str columns, zstd shards.
MDS = _REPO / "packages/litdata-format/tests/fixtures/mds-0.13.0/mds_zstd"
# The variables an example does not inherit from the test run: its own are set for it.
CLEARED_ENV = ("AWS_", "HF_", "GOOGLE_", "AZURE_", "STORAGE_EMULATOR_HOST", "LITDATA_")

# Runs an example's import lines in a fresh interpreter (argv[1]) and says whether they load torch:
# it stops the moment torch's module would be created, so it costs an interpreter start, not an import
# of torch. A lookup that only finds torch (importlib.util.find_spec) does not count; an import does.
_TORCH_PROBE = """
import importlib.abc, importlib.machinery, os, sys


class _Stop(importlib.abc.Loader):
    def create_module(self, spec):
        print("torch", flush=True)
        os._exit(0)

    def exec_module(self, module):
        raise AssertionError("unreachable: create_module exits")


class _Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _Stop()
        return spec


sys.meta_path.insert(0, _Watch())
exec(compile(sys.argv[1], "example.py", "exec"), {"__name__": "__main__"})
print("no torch", flush=True)
"""


def import_lines(code: str) -> str:
    """The example's leading import statements (those before its first other statement), as source."""
    body = ast.parse(code).body
    end = 0
    for statement in body:
        if not isinstance(statement, ast.Import | ast.ImportFrom):
            break
        end = statement.end_lineno or end
    return "\n".join(code.split("\n")[:end]) + "\n"


# Libraries an example's import lines may import beside torch that a zygote imports too (seconds of CPU each).
PRELOADABLE = ("torch_geometric",)


def preloadable(code: str) -> tuple[str, ...]:
    """The libraries of ``PRELOADABLE`` that ``code``'s import lines import: loaded before its other statements run."""
    named: set[str] = set()
    for statement in ast.parse(import_lines(code)).body:
        if isinstance(statement, ast.Import):
            named.update(alias.name.split(".")[0] for alias in statement.names)
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            named.add(statement.module.split(".")[0])
    return tuple(name for name in PRELOADABLE if name in named)


def loads_torch_first(code: str, cwd: Path, environ: dict[str, str]) -> bool:
    """Whether ``code``'s import lines load torch when run in a fresh interpreter (in ``cwd``, with ``environ``)."""
    proc = subprocess.run(
        [sys.executable, "-c", _TORCH_PROBE, import_lines(code)],
        check=False,
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() in ("torch", "no torch"), (
        f"the import lines failed alone (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout.strip() == "torch"


def run_example(code: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300.0) -> str:
    """Run ``code`` as ``example.py`` in ``cwd`` with this interpreter; its stdout, or fail with its output.

    An example whose import lines load torch is forked from the torch-preloaded test zygote
    (``tests/support/zygote.py``) instead of starting a fresh interpreter: 2.5-3.5 CPU-seconds of torch's
    import saved. For such an example torch is loaded before any of its other statements runs
    either way, so what litdata does comes out as in a fresh interpreter (the zygote's threads do
    not survive the fork, and optimize decides how to start its workers from the threads that run:
    ``default_start_method`` in ``litdata_prep._engine``); what differs is only when numpy and torch
    were imported (before the import lines, under the test process's environment, whose differences
    from the example's, ``AWS_*``, ``HF_*``, ``LITDATA_*``, ..., are no variables numpy or torch
    read). An example that loads torch later, or never, gets a fresh interpreter. An example whose
    import lines also import torch-geometric (``preloadable``) is forked from a zygote that imported
    it too: the same argument, for its import.
    """
    script = cwd / "example.py"
    code = textwrap.dedent(code)
    script.write_text(code)
    base = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED_ENV)}
    environ = {**base, "PYTHONPATH": str(_REPO), **(env or {})}
    if loads_torch_first(code, cwd, environ):
        proc = run_python([str(script)], env=environ, cwd=cwd, timeout=timeout, preload=preloadable(code))
    else:
        proc = subprocess.run(
            [sys.executable, str(script)],
            check=False,
            cwd=cwd,
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    assert proc.returncode == 0, f"rc {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    return proc.stdout


@dataclass
class World:
    """What an example's inputs are made in: its empty working folder and the local servers."""

    cwd: Path
    s3: S3Server
    hf: HfHubServer
    my_data: Path  # 100,000 samples (the docs' "out: 100,000"), written once
    gcs: FakeGcsServer | None = None
    azure: AzuriteServer | None = None

    def upload(self, folder: Path, url: str) -> None:
        storage = get_storage(url, self.s3.storage_options())
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                storage.upload(path, path.relative_to(folder).as_posix())

    def bucket(self, name: str) -> None:
        self.s3.client().create_bucket(Bucket=name)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.s3.client().put_object(Bucket=bucket, Key=key, Body=data)


def numbers(folder: Path, count: int, chunk_bytes: str = "256KB") -> Path:
    writer = BinaryWriter(folder, chunk_bytes=chunk_bytes)
    for i in range(count):
        writer.add_item(i, i)
    writer.done()
    writer.merge()
    return folder


def _png(color: int) -> bytes:
    from io import BytesIO

    out = BytesIO()
    Image.new("RGB", (8, 8), (color, color, color)).save(out, format="PNG")
    return out.getvalue()


def _parquet(folder: Path, files: int = 2, rows: int = 20) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        table = pa.table({"id": ids, "text": [f"row {i}" for i in ids]})
        pq.write_table(table, folder / f"train-{f:05d}-of-{files:05d}.parquet", row_group_size=8)


def _my_data(w: World) -> None:
    w.bucket("my-bucket")
    w.upload(w.my_data, "s3://my-bucket/my-data")


def _seg_pairs(w: World) -> None:
    w.bucket("bucket")
    for i in range(6):
        w.put("bucket", f"seg/img_{i:03d}.jpg", b"jpeg %d" % i)
        w.put("bucket", f"seg/img_{i:03d}.png", b"mask %d" % i)
    w.put("bucket", "seg/img_999.jpg", b"an image without a mask")


def _raw_files(w: World) -> None:
    """Example 2's pairs, and the files the raw examples after it list (s3://bucket/files/)."""
    _seg_pairs(w)
    for i in range(5):
        w.put("bucket", f"files/{i:03d}.bin", b"raw file %d" % i)


def _bucket_data(w: World) -> None:
    w.bucket("bucket")
    w.upload(w.my_data, "s3://bucket/data")


def _mds(w: World) -> None:
    w.bucket("my-bucket")
    w.upload(MDS, "s3://my-bucket/my-mds-data")


def _hf_repo(w: World, repo: str) -> None:
    _parquet(w.hf.dataset_repo(repo) / "data", files=2, rows=10)


def _my_train(w: World) -> None:
    w.bucket("my-bucket")
    w.upload(w.my_data, "s3://my-bucket/train")


def _tinyllama(w: World) -> None:
    from litdata import TokensLoader

    w.bucket("tinyllama-template")
    for prefix, first, blocks in (("slimpajama/train", 0, 40), ("starcoder", 1000, 20)):
        folder = w.cwd.parent / "made" / prefix
        writer = BinaryWriter(folder, chunk_size=2049 * 4, item_loader=TokensLoader())
        for i in range(blocks):
            writer.add_item(i, np.full(2049, first + i, dtype=np.int32))
        writer.done()
        writer.merge()
        w.upload(folder, f"s3://tinyllama-template/{prefix}")


def _two_inputs(w: World) -> None:
    for name in ("input_dir_1", "input_dir_2"):
        numbers(w.cwd / name, 30)


def _rank_chunks(w: World) -> None:
    for rank in range(2):
        writer = BinaryWriter(w.cwd / "my_chunks", chunk_size=4, rank=rank)
        for i in range(10):
            writer.add_item(i, {"rank": rank, "i": i})
        writer.done()  # {rank}.index.json only, as the docs' case
    assert not (w.cwd / "my_chunks" / "index.json").exists()


def _parquet_bucket(w: World) -> None:
    w.bucket("my-bucket")
    _parquet(w.cwd.parent / "made" / "pq")
    w.upload(w.cwd.parent / "made" / "pq", "s3://my-bucket/my-parquet-data")


def _my_optimized_dataset(w: World) -> None:
    w.bucket("my-bucket")
    w.upload(w.my_data, "s3://my-bucket/my_optimized_dataset")


def _shared_drive(w: World) -> None:
    numbers(w.cwd / "data" / "shared-drive" / "some-data", 100)


def _my_bucket(w: World) -> None:
    w.bucket("my-bucket")


def _fast_data(w: World) -> None:
    w.bucket("my-bucket")
    w.upload(w.my_data, "s3://my-bucket/fast_data")


def _large_images(w: World) -> None:
    w.bucket("my-bucket")
    (w.cwd / "my_large_images").mkdir()
    for i in range(6):
        Image.new("RGB", (300, 260), (i * 40, 0, 0)).save(w.cwd / "my_large_images" / f"{i}.png")


def _uri_schemes(w: World) -> None:
    assert w.gcs is not None and w.azure is not None
    _fast_data(w)
    local = numbers(w.cwd / "var" / "data" / "fast_data", 100)
    shutil.copytree(local, w.cwd / "data" / "shared-drive" / "some-data")
    w.gcs.create_bucket("my-bucket")
    gcs = get_storage("gs://my-bucket/fast_data", {**w.gcs.gcsfs_options(), "backend": "fsspec"})
    w.azure.create_container("my-container")
    azure = get_storage("azure://my-container/fast_data", _azure_options(w.azure))
    for path in sorted(local.iterdir()):
        gcs.upload(path, path.name)
        azure.upload(path, path.name)
    _hf_repo(w, "org/name")


def _azure_options(server: AzuriteServer) -> dict[str, str]:
    return {"account_url": server.endpoint, "credential": server.account_key}


SETUPS: dict[str, Callable[[World], None]] = {
    "my_data": _my_data,
    "my_data_no_env": _my_data,
    "seg_pairs": _seg_pairs,
    "raw_files": _raw_files,
    "bucket_data": _bucket_data,
    "mds": _mds,
    "hf_clevr": lambda w: _hf_repo(w, "leonardPKU/clevr_cogen_a_train"),
    "hf_openthoughts": lambda w: _hf_repo(w, "open-thoughts/OpenThoughts-114k"),
    "my_train": _my_train,
    "tinyllama": _tinyllama,
    "two_inputs": _two_inputs,
    "rank_chunks": _rank_chunks,
    "parquet": _parquet_bucket,
    "my_optimized_dataset": _my_optimized_dataset,
    "shared_drive": _shared_drive,
    "my_bucket": _my_bucket,
    "fast_data": _fast_data,
    "large_images": _large_images,
    "uri_schemes": _uri_schemes,
}
