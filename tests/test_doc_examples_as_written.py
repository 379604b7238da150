"""Every example of upstream's documentation that can run offline, run as a user runs it.

The examples' text is committed verbatim (``tests/fixtures/doc_examples/``, inventory in
``tests/support/doc_examples.py``). Each runnable one runs as ``example.py`` in a process of its own in an
empty folder and must exit with code 0 (the example's own ``assert`` lines included); the only
changes are a ``__main__`` guard and the local servers' URLs and options (listed per example). Inputs
an example reads (a bucket's dataset, a folder of images) are made before it runs: that is the
user's data, not a change to the example. An example that continues an earlier one (``after``) runs
with that example's text before its own, in the same script. The standard variables (``AWS_ENDPOINT_URL``,
``HF_ENDPOINT``, ...) point at local servers: moto for S3, the Hub stand-in for ``hf://``.

The process is a fresh interpreter, except for an example whose import lines (the statements
before its first other one) load torch: that one is forked from the test zygote
(``tests/support/zygote.py``), a process that imported numpy and torch once, which is what a fresh
interpreter is once those lines ran (see :func:`run_example`); if those lines import torch-geometric
too, from a second zygote that imported it as well (started with the module, so it imports while
the examples before the first that needs it run). ``LITDATA_TEST_FORK=0`` runs every example in a
fresh interpreter.

An example that mostly waits by design and needs no server (:data:`BACKGROUND`) starts with the
file's first example, in a folder of its own, and runs while the others do; its test takes its
output once it is done and checks it as any other's.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from litdata_format import BinaryWriter
from litdata_io import get_storage
from tests.support import module_servers
from tests.support.doc_examples import EXAMPLES, FOLDER, SHELL, STATUSES, Example, runnable_script, verbatim
from tests.support.selected import selected_params
from tests.support.servers import S3Server
from tests.support.servers_extra import (
    AzuriteServer,
    FakeGcsServer,
    HfHubServer,
)
from tests.support.zygote import run_python, start_zygote

_REPO = Path(__file__).resolve().parent.parent
# Upstream's documentation text: $LITDATA_DOCS_TXT, else the project's shared folder beside the checkout.
DOCS = Path(os.environ.get("LITDATA_DOCS_TXT") or _REPO.parent / "shared" / "LITDATA-DOCS.txt")
# Written by MosaicML Streaming 0.13.0: int, pil, bytes and str columns, zstd shards.
MDS = _REPO / "packages/litdata-format/tests/fixtures/mds-0.13.0/mds_zstd"

# The pinned counts: every code block of the docs is in the inventory.
PYTHON_EXAMPLES = 67
SHELL_BLOCKS = 15
RUNNABLE = 41
PENDING: list[
    int
] = []  # runnable offline with the allowed changes, not a test yet (tests/support/doc_examples.py says why)

_CLEARED_ENV = ("AWS_", "HF_", "GOOGLE_", "AZURE_", "STORAGE_EMULATOR_HOST", "LITDATA_")
# Examples that wait most of their run and use no server, setup or earlier example: run in the background.
BACKGROUND = {25: "a producer sleeping 10 ms per item, 1000 items: 10 s"}


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
    base = {k: v for k, v in os.environ.items() if not k.startswith(_CLEARED_ENV)}
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


def _numbers(folder: Path, count: int, chunk_bytes: str = "256KB") -> Path:
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
        _numbers(w.cwd / name, 30)


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
    _numbers(w.cwd / "data" / "shared-drive" / "some-data", 100)


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
    local = _numbers(w.cwd / "var" / "data" / "fast_data", 100)
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


def _objects(server: S3Server, bucket: str, prefix: str) -> list[str]:
    listing = server.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for item in listing.get("Contents", [])]


def _after(number: int, w: World) -> None:
    """What an example leaves behind, where the example itself checks nothing."""
    if number == 7:
        assert any((w.cwd / "path/to/cache").rglob("index.json"))
    elif number == 22:
        assert (w.cwd / "dataloader_state.pt").is_file()
    elif number == 37:
        assert (w.cwd / "my_chunks" / "index.json").is_file()
    elif number == 44:
        assert (w.cwd / "my_optimized_dataset" / "index.json").is_file()
    elif number == 56:
        assert any((w.cwd / "path/to/your/cache").rglob("index.json"))
    elif number == 60:
        assert (w.cwd / "fernet.pem").is_file() and any(
            k.endswith("index.json") for k in _objects(w.s3, "my-bucket", "optimized_data/")
        )
    elif number == 62:
        log = (w.cwd / "litdata_debug.log").read_text()
        assert "download" in log and "read" in log
    elif number == 64:
        assert any((w.cwd / "fast-ssd/cache/run-1").rglob("index.json"))
    elif number == 67:
        assert sorted(k.rsplit("/", 1)[1] for k in _objects(w.s3, "my-bucket", "my_resized_images/")) == [
            f"{i}.png" for i in range(6)
        ]


def _selected_examples(request: pytest.FixtureRequest) -> list[Example]:
    """This module's examples that this process runs, in order."""
    return [params["example"] for name, params in selected_params(request) if name == "test_example_runs_as_written"]


@pytest.fixture(scope="module", autouse=True)
def preloaded_zygote(request: pytest.FixtureRequest) -> None:
    """The zygote of the examples that import torch-geometric starts with the module: it imports while the
    examples before the first that needs it run."""
    wanted: set[str] = set()
    for example in _selected_examples(request):
        wanted.update(preloadable(runnable_script(example, {})))
    if wanted:
        start_zygote(tuple(name for name in PRELOADABLE if name in wanted))


@pytest.fixture(scope="module")
def background(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    s3: S3Server,
    hf: HfHubServer,
    my_data: Path,
) -> Iterator[dict[int, tuple[Future[str], World]]]:
    """Each selected example of :data:`BACKGROUND`, run from the first example's start: its output, its world."""
    selected = [example for example in _selected_examples(request) if example.number in BACKGROUND]
    for example in selected:
        assert not (example.servers or example.setup or example.after), example  # a folder of its own is all
    with ThreadPoolExecutor(max(1, len(selected)), thread_name_prefix="example") as pool:
        runs: dict[int, tuple[Future[str], World]] = {}
        for example in selected:
            folder = tmp_path_factory.mktemp(f"example-{example.number}")
            cwd = folder / "run"
            cwd.mkdir()
            world = World(cwd=cwd, s3=s3, hf=hf, my_data=my_data)
            values = {"s3_endpoint": s3.endpoint, "s3_key": s3.access_key, "s3_secret": s3.secret_key, "cwd": str(cwd)}
            code = runnable_script(example, values)
            runs[example.number] = (pool.submit(run_example, code, cwd, _env(example, world, folder / "home")), world)
        yield runs


s3 = module_servers.s3
hf = module_servers.hf
gcs = module_servers.gcs
azure = module_servers.azure


@pytest.fixture(scope="module")
def my_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _numbers(tmp_path_factory.mktemp("my-data") / "my-data", 100_000)


def _env(example: Example, w: World, home: Path) -> dict[str, str]:
    env = {
        "LITDATA_CACHE_DIR": str(home / "litdata-cache"),
        "HF_HOME": str(home / "hf"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
    }
    if "s3" in example.servers:
        env |= {
            "AWS_ACCESS_KEY_ID": w.s3.access_key,
            "AWS_SECRET_ACCESS_KEY": w.s3.secret_key,
            "AWS_ENDPOINT_URL": w.s3.endpoint,
            "AWS_REGION": w.s3.region,
        }
    if "hf" in example.servers:
        env |= w.hf.env
    if w.gcs is not None:
        env |= {"STORAGE_EMULATOR_HOST": w.gcs.endpoint}
    return env


def _param(example: Example) -> object:
    marks = [pytest.mark.slow]  # a fresh interpreter importing torch, often workers: seconds each
    if example.servers:
        marks.append(pytest.mark.cloud)
    return pytest.param(example, id=f"{example.number:02d}_{example.slug}", marks=marks)


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES if e.runs])
def test_example_runs_as_written(
    example: Example,
    tmp_path: Path,
    s3: S3Server,
    hf: HfHubServer,
    my_data: Path,
    background: dict[int, tuple[Future[str], World]],
    request: pytest.FixtureRequest,
) -> None:
    if example.number in background:  # started with the file's first example
        run, world = background[example.number]
        out = run.result()
        for text in example.expect:
            assert text in out, f"{text!r} not in the example's output:\n{out[-3000:]}"
        _after(example.number, world)
        return
    urllib.request.urlopen(urllib.request.Request(f"{s3.endpoint}/moto-api/reset", method="POST"), timeout=10).close()
    shutil.rmtree(hf.root / "datasets", ignore_errors=True)
    cwd = tmp_path / "run"
    cwd.mkdir()
    world = World(cwd=cwd, s3=s3, hf=hf, my_data=my_data)
    # started only for the examples that use them (one does)
    if "gs" in example.servers:
        world.gcs = request.getfixturevalue("gcs")
    if "azure" in example.servers:
        world.azure = request.getfixturevalue("azure")
    if example.setup:
        SETUPS[example.setup](world)
    values = {"s3_endpoint": s3.endpoint, "s3_key": s3.access_key, "s3_secret": s3.secret_key, "cwd": str(cwd)}
    if world.azure is not None:
        values |= {"azure_url": world.azure.endpoint, "azure_key": world.azure.account_key}
    out = run_example(runnable_script(example, values), cwd, _env(example, world, tmp_path / "home"))
    for text in example.expect:
        assert text in out, f"{text!r} not in the example's output:\n{out[-3000:]}"
    _after(example.number, world)


def test_inventory_covers_every_code_block_of_the_docs() -> None:
    assert [e.number for e in EXAMPLES] == list(range(1, PYTHON_EXAMPLES + 1))
    assert [s.number for s in SHELL] == list(range(1, SHELL_BLOCKS + 1))
    committed = sorted(p.name for p in FOLDER.iterdir())
    assert committed == sorted([e.path.name for e in EXAMPLES] + [s.path.name for s in SHELL])
    for example in EXAMPLES:
        assert example.status in STATUSES, example
        if example.status in ("offline_impossible", "pending"):
            assert example.reason and not (example.subs or example.guard_from or example.setup), example
        else:
            # the status says exactly which changes the example gets
            assert bool(example.subs) == (example.status == "local_url"), example
            assert (example.guard_from is not None) == (example.status == "guarded"), example
    by_number = {e.number: e for e in EXAMPLES}
    for example in EXAMPLES:
        # an example continues earlier ones that run themselves; their text comes first, each with its own changes
        assert all(n < example.number and by_number[n].runs for n in example.after), example
        parts = [runnable_script(replace(by_number[n], after=()), {}) for n in (*example.after, example.number)]
        assert runnable_script(example, {}) == "".join(parts)
    runnable = [e for e in EXAMPLES if e.runs]
    assert len(runnable) == RUNNABLE
    assert [e.number for e in EXAMPLES if e.status == "pending"] == PENDING
    counts = {status: sum(e.status == status for e in EXAMPLES) for status in STATUSES}
    line = f"{len(runnable)} of {PYTHON_EXAMPLES} run as written"
    print(line, counts)
    # the docs page states the same count, and lists every example with its status
    page = (_REPO / "docs" / "doc-examples.md").read_text()
    assert line in page
    for e in EXAMPLES:
        lines = f"{e.lines[0]}" if e.lines[0] == e.lines[1] else f"{e.lines[0]}-{e.lines[1]}"
        assert f"| {e.number} | {lines} | {e.status} |" in page, e


def test_an_example_is_forked_only_if_its_import_lines_load_torch(tmp_path: Path) -> None:
    """What :func:`run_example` decides by: the import lines, run alone in a fresh interpreter."""
    code = "import os\nfrom json import (\n    dumps,\n)\nx = 1\nimport torch\n"
    assert import_lines(code) == "import os\nfrom json import (\n    dumps,\n)\n"
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    assert loads_torch_first("import collections\nfrom torch.utils.data import DataLoader\n", tmp_path, env)
    assert loads_torch_first("from litdata import optimize, StreamingDataset\n", tmp_path, env)  # examples 27, 28, 44
    # optimize and map alone load no torch: their workers fork, so such an example needs a fresh interpreter
    assert not loads_torch_first("import litdata as ld\nfrom litdata import map, optimize\n", tmp_path, env)
    assert not loads_torch_first(code, tmp_path, env)  # torch only after another statement
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing in the example's folder


def test_committed_examples_are_the_docs_text() -> None:
    """Each committed example is the docs' lines, byte for byte (the docs text: ``../shared`` or $LITDATA_DOCS_TXT)."""
    if not DOCS.is_file():
        pytest.skip(f"{DOCS} is not here (set LITDATA_DOCS_TXT to upstream's docs text)")
    lines = DOCS.read_text(encoding="utf-8").split("\n")
    blocks = [*EXAMPLES, *SHELL]
    for block in blocks:
        first, last = block.lines
        assert verbatim(block.path) == "\n".join(lines[first - 1 : last]), block.path.name
        assert lines[first - 2].strip() == "" or first == 1, block.path.name  # a block starts after a blank line
    for example in EXAMPLES:
        # a continued example's script holds every part's docs text, in the docs' order (unchanged parts verbatim)
        script = runnable_script(example, {})
        parts = [e for e in EXAMPLES if e.number in (*example.after, example.number)]
        for part in parts:
            text = "\n".join(lines[part.lines[0] - 1 : part.lines[1]])
            if not (part.subs or part.guard_from):
                assert text + "\n" in script, (example.number, part.number)
        assert [p.lines for p in parts] == sorted(p.lines for p in parts), example.number
    # every line of code in the docs is in some block: the lines outside blocks are prose or blank
    inside = {n for b in blocks for n in range(b.lines[0], b.lines[1] + 1)}
    code_starts = ("from litdata", "import litdata", "optimize(", "dataset = ", "ld.", "StreamingDataset(")
    stray = [n for n, line in enumerate(lines, 1) if n not in inside and line.startswith(code_starts)]
    assert stray == []
