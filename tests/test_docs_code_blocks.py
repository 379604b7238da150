"""Every code block of our own docs (README.md, docs/*.md) runs as written.

Each Python block runs as ``example.py`` in a process of its own, in an empty folder, the way
``tests/test_doc_examples_as_written.py`` runs upstream's examples (its :func:`run_example`), and
must exit with code 0 (the block's own ``assert`` lines included). A block is found by a piece of
its text (``key``) and runs alone unless :data:`BLOCKS` says otherwise:

- ``after``: it continues earlier blocks (their names, or the dataset they write): their text runs
  first, in the same script, as a reader who follows the page runs them. A block that another
  continues runs there, not again alone (a page's chain of blocks is one script).
- ``given``: the names the block stands for and the docs leave to the reader (``fn``, ``inputs``,
  the documents to tokenize) are defined before it, in code that is the user's, not the docs'.
- ``guard_from``: the block calls ``optimize`` at the top level, as a piece of a script whose call
  goes under ``if __name__ == "__main__":`` (docs/optimize.md's first example says why: the workers
  import the script again); its lines from the first that starts so run under that guard.
- ``setup``: the user's data (a dataset in a bucket, a folder of images) is made before it runs;
  a bucket is the local S3 server's, reached through the standard variables (``AWS_ENDPOINT_URL``),
  as a user's machine reaches the real one; ``subs`` turn an absolute placeholder folder
  (``/var/data/...``) into one of the working folder, and a placeholder server or its options
  (``https://example.com``, ``storage_options={...}``) into a local server's (``servers``).
- ``cannot``: the block cannot run here; the reason says why.

A block not listed runs alone; every block that is not Python (shell lines, outputs, config
files) is listed in :data:`NOT_PYTHON` with the reason it is not run, or where it is.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from litdata_format import BinaryWriter, TokensLoader
from tests.support import module_servers
from tests.support.doc_worlds import SETUPS, World, run_example
from tests.support.http_server import serve_folder
from tests.support.servers import S3Server
from tests.support.servers_extra import (
    AzuriteServer,
    HfHubServer,
)

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)


@dataclass(frozen=True)
class CodeBlock:
    """A fenced block of a page: its language (the fence's info string), first line and text."""

    page: str
    line: int
    lang: str
    text: str


def code_blocks(path: Path) -> list[CodeBlock]:
    """The fenced code blocks of a markdown file, in order."""
    source = path.read_text(encoding="utf-8")
    page = path.relative_to(ROOT).as_posix()
    return [CodeBlock(page, source.count("\n", 0, m.start()) + 1, m[1], m[2]) for m in _FENCE.finditer(source)]


@dataclass(frozen=True)
class Block:
    """How one Python block of the docs runs (see the module's docstring)."""

    page: str
    key: str
    after: tuple[str, ...] = ()  # keys of earlier blocks, "page::key" for another page's
    given: str = ""
    guard_from: str | None = None
    setup: str | None = None
    subs: tuple[tuple[str, str], ...] = ()
    servers: tuple[str, ...] = ()  # beside S3 and the Hub stand-in, which every block has: "gs", "azure", "http"
    cannot: str = ""
    expect: tuple[str, ...] = ()


_FN_INPUTS = "import litdata as ld\n\n\ndef fn(index):\n    return {'index': index}\n\n\ninputs = list(range(100))\n"
_RECORDS = (
    "import litdata as ld\n\n\ndef make_record(user):\n    return {'id': user, 'name': 'x', 'visits': 1}\n\n\n"
    "ids = [f'user-{i}' for i in range(100)]\n"
)

# README's dataset, which docs/streaming.md's loader reads, and that loader, which its next blocks use.
_MY = 'README.md::writer = BinaryWriter("my_dataset", chunk_bytes="64MB", compression="zstd")'
_LOADER = 'dataset = StreamingDataset("my_dataset", shuffle=True)  # a local path or a URL'
_RESUME = "state = loader.state_dict()  # save it with your checkpoint"

BLOCKS: tuple[Block, ...] = (
    Block("README.md", "ld.optimize(fn=make, inputs=list(range(1000))"),
    Block("README.md", 'writer = BinaryWriter("my_dataset", chunk_bytes="64MB", compression="zstd")',
          expect=("1000 {'index': 42",)),
    Block("docs/cache.md", 'max_cache_size="10GB",  # the cache budget', setup="my_data"),
    Block("docs/cache.md", "cache = ChunkCache(cache_dir, get_storage(url)",
          given="import os\n\nfrom litdata_format import load_index\n\nurl = os.path.abspath('downloaded')\n"
                "cache_dir = 'chunks'\nindex = load_index(url)\nchunks_in_reading_order = list(index.chunks)\n",
          setup="downloaded"),
    Block("docs/format.md", 'writer = BinaryWriter("my_dataset", chunk_bytes="64MB")  # or chunk_size=1000'),
    Block("docs/format.md", 'reader = DatasetReader("my_dataset")\nlen(reader), reader[42]',
          after=('writer = BinaryWriter("my_dataset", chunk_bytes="64MB")  # or chunk_size=1000',)),
    Block("docs/format.md", "class PointSerializer(Serializer):"),
    Block("docs/format.md", 'BinaryWriter("tokens", chunk_size=2049 * 1024, item_loader=TokensLoader())',
          given="documents = ['litdata streams tokens ' * 200] * 3\n\n\ndef tokenize(document):\n"
                "    return [ord(c) for c in document]\n"),
    Block("docs/format.md", 'writer = BinaryWriter("framed"', after=("class PointSerializer(Serializer):",)),
    Block("docs/format.md", 'encryption = FernetEncryption(password="a long secret"',
          after=("class PointSerializer(Serializer):", 'writer = BinaryWriter("framed"')),
    Block("docs/format.md", 'DatasetReader("downloaded", allow_pickle=False)',
          after=("class PointSerializer(Serializer):", 'writer = BinaryWriter("framed"',
                 'encryption = FernetEncryption(password="a long secret"'), setup="downloaded"),
    Block("docs/mixing.md", "combined = CombinedStreamingDataset(", setup="two_token_datasets"),
    Block("docs/mixing.md", "parallel = ParallelStreamingDataset([StreamingDataset(", setup="two_inputs"),
    Block("docs/mixing.md", "def transform(samples, rngs):",
          after=("parallel = ParallelStreamingDataset([StreamingDataset(",),
          given="from litdata import StreamingDataset\n\n"
                "dset_1, dset_2 = StreamingDataset('input_dir_1'), StreamingDataset('input_dir_2')\n",
          setup="two_inputs"),
    Block("docs/mixing.md", "cycled = ParallelStreamingDataset(",
          after=("parallel = ParallelStreamingDataset([StreamingDataset(", "def transform(samples, rngs):"),
          given="from litdata import StreamingDataset\n\n"
                "dset_1, dset_2 = StreamingDataset('input_dir_1'), StreamingDataset('input_dir_2')\n",
          setup="two_inputs_and_input_dir",
          expect=("100",)),
    Block("docs/mixing.md", "class Fill(Dataset):", expect=("{'index': 0, 'value': 0} 10000",)),
    Block("docs/optimize.md", "def random_images(index):"),
    Block("docs/optimize.md", "yield 1 / data  # inputs that raise"),
    Block("docs/optimize.md", '"out2", chunk_bytes="64MB", compression="zstd", compression_level="batch"',
          given=_FN_INPUTS, guard_from="#"),
    Block("docs/optimize.md", 'ld.optimize(fn=make_record, inputs=ids, output_dir="records"', given=_RECORDS,
          guard_from="ld.optimize("),
    Block("docs/optimize.md", 'ld.build_keys_index("records"', setup="records"),
    Block("docs/optimize.md", 'with ld.dataset_update("records") as update:',
          after=('ld.build_keys_index("records"',), given=_RECORDS, setup="records"),
    Block("docs/optimize.md", 'optimize(fn=compress, inputs=list(range(100)), output_dir="./ds"',
          given="import litdata as ld\nfrom litdata import optimize\n\n\ndef compress(index):\n"
                "    return index, index**2\n", guard_from="optimize("),
    Block("docs/optimize.md", "ld.optimize(fn=fn, queue=q, output_dir="),
    Block("docs/optimize.md", "def keep_long(sample):", setup="text_raw"),
    Block("docs/optimize.md", '"s3://bucket/ds", chunk_size=1000, use_checkpoint=True)  # killed -9 halfway',
          cannot="its first call is killed with kill -9 halfway (the comment), which a script cannot do to itself; "
                 "tests/test_prep_checkpoint_kill.py kills a real optimize and runs the same call again"),
    Block("docs/optimize.md", 'ray.init(address="auto")',
          cannot="connects to a running Ray cluster (address='auto'); tests/test_ray.py runs executor='ray' and "
                 "RayExecutor on a local cluster started inside a network namespace"),
    Block("docs/optimize.md", "machine=Machine.DATA_PREP",
          cannot="a 32-node job (num_nodes=32 on a Lightning cluster, Machine.DATA_PREP); "
                 "tests/test_prep_multinode.py runs several nodes on one machine"),
    Block("docs/optimize.md", "ray.data.read_datasource(LitDataDatasource(",
          cannot="continues a Ray Data session (ray, opts and transform are the reader's) on a Ray cluster; "
                 "tests/test_ray.py reads and writes with LitDataDatasource / LitDataDatasink"),
    Block("docs/optimize.md", "def resize_image(image_path, output_dir):",
          given="import glob\n\nimport litdata as ld\n\ninputs = sorted(glob.glob('my_large_images/*.png'))\n",
          setup="large_images"),
    Block("docs/optimize.md", 'ld.merge_datasets(input_dirs=["fast_data_1", "s3://bucket/fast_data_2"]',
          given="import litdata as ld\n", setup="two_to_merge"),
    Block("docs/parquet.md", "item_loader=ParquetLoader(low_memory=True)", setup="parquet", expect=("'id': 0",)),
    Block("docs/parquet.md", 'ld.StreamingDataset("s3://bucket/data/train-*.parquet")',
          given="import litdata as ld\n", setup="parquet_globs",
          subs=(('"/data/shards/part-000[0-3].parquet"', '"data/shards/part-000[0-3].parquet"'),)),
    Block("docs/parquet.md", "ld.index_parquet_dataset(", setup="parquet"),
    Block("docs/parquet.md", 'uri = "hf://datasets/leonardPKU/clevr_cogen_a_train/data"', setup="hf_clevr"),
    Block("docs/raw.md", "def to_image(data: bytes)", setup="images"),
    Block("docs/raw.md", "class SegmentationRawDataset(StreamingRawDataset):", setup="seg_pairs"),
    Block("docs/storage.md", 'StreamingDataset("/var/data/fast_data")  # a local folder, read in place',
          subs=(('"/var/data/fast_data"', '"{cwd}/var/data/fast_data"'),
                ('"file:///var/data/fast_data"', '"file://{cwd}/var/data/fast_data"'),
                ('"local:/data/shared-drive/some-data"', '"local:{cwd}/data/shared-drive/some-data"'),
                ('StreamingDataset("r2://my-bucket/fast_data", storage_options={...})',
                 'StreamingDataset("r2://my-bucket/fast_data", storage_options={"endpoint_url": "{s3_endpoint}", '
                 '"aws_access_key_id": "{s3_key}", "aws_secret_access_key": "{s3_secret}"})'),
                ('StreamingDataset("azure://my-container/fast_data", storage_options={...})',
                 'StreamingDataset("azure://my-container/fast_data", storage_options={"account_url": "{azure_url}", '
                 '"credential": "{azure_key}"})'),
                ('"https://example.com/datasets/fast_data"', '"{http_url}/datasets/fast_data"')),
          servers=("gs", "azure", "http"), setup="uri_schemes_and_http"),
    Block("docs/storage.md", 'output_dir="s3://my-bucket/datasets/run_{%Y-%m-%d}"',
          given="from litdata import optimize\n" + _FN_INPUTS, guard_from="optimize(", setup="my_bucket"),
    Block("docs/storage.md", 'StreamingDataset(Dir(path="/fast-ssd/cache/run-1"',
          subs=(('"/fast-ssd/cache/run-1"', '"fast-ssd/cache/run-1"'), ('"/fast-ssd/cache"', '"fast-ssd/cache"')),
          setup="fast_data"),
    Block("docs/storage.md", "aws_storage_options = {",
          cannot="credentials of six providers side by side: placeholders ('...', <account_id>), a profile "
                 "'research' in ~/.aws and the reader's environment (PROJECT_ID, AZURE_ACCOUNT_NAME); each form is "
                 "run against a local server in tests/test_credentials*.py and tests/test_storage_*.py"),
    Block("docs/storage.md", "class MyStorage(litdata_io.Storage):"),
    Block("docs/storage.md", "class TestMyStorage(StorageConformance):",
          after=("class MyStorage(litdata_io.Storage):",)),
    Block("docs/streaming.md", _LOADER, after=(_MY,)),
    Block("docs/streaming.md", "state = loader.state_dict()  # save it with your checkpoint", after=(_MY, _LOADER)),
    Block("docs/streaming.md", "train, val, test = train_test_split(", after=(_MY,)),
    Block("docs/streaming.md", "profile_batches=20,", after=(_MY, _LOADER, _RESUME)),
    Block("docs/streaming.md", "watchdog_s=120)", after=(_MY, _LOADER, _RESUME, "profile_batches=20,")),
    Block("docs/streaming.md", "stats = loader.stats()",
          after=(_MY, _LOADER, _RESUME, "profile_batches=20,", "watchdog_s=120)")),
    Block("docs/tracing.md", 'enable_tracer(level="chunk", log_file="litdata_debug.log")', setup="my_data"),
    Block("docs/tracing.md", 'conv = convert_file("litdata_debug.log"',
          after=('enable_tracer(level="chunk", log_file="litdata_debug.log")',), setup="my_data"),
    Block("docs/tracing.md", 'with trace_span("download", "download", chunk=index) as span:',
          given="index, i, c = 3, 7, 3\nexc = RuntimeError('the prefetch thread failed')\n\n\ndef fetch():\n"
                "    return 1024\n"),
)  # fmt: skip

# Blocks that are not Python: (page, a piece of the text or "" for every one of the page, why it is not run here).
NOT_PYTHON: tuple[tuple[str, str, str], ...] = (
    (
        "README.md",
        "pip install litdata            # everything",
        "installs from PyPI; tests/scripts/install_matrix.py installs each package alone from its wheel,"
        " as these lines do",
    ),
    ("README.md", "curl -LsSf https://astral.sh/uv/install.sh", "installs uv from the internet"),
    (
        "README.md",
        "uv run litdata quickstart",
        "the README's two commands: tests/scripts/install_matrix.py runs `litdata quickstart`; the other is this suite",
    ),
    ("README.md", "uv run mkdocs build --strict", "builds the docs site: tests/test_docs_site.py runs the same build"),
    (
        "docs/benchmarks.md",
        "",
        "benchmark runs of minutes against upstream in a side venv; tests/test_benchmarks_smoke.py runs the scripts",
    ),
    ("docs/cache.md", "$ litdata cache path", "a terminal session with its output; packages/litdata/tests/test_cli.py"),
    (
        "docs/cache.md",
        "export LITDATA_ASYNC_CHUNK_PREFETCH=0",
        "environment settings, not a program; packages/litdata-io/tests/test_prefetch.py",
    ),
    ("docs/parquet.md", 'pip install "litdata-stream[parquet]"', "installs from PyPI; tests/scripts/install_matrix.py"),
    ("docs/parquet.md", '{"chunks": [{"chunk_bytes": 3154', "an index.json shown, not a program"),
    ("docs/storage.md", '[project.entry-points."litdata.storage"]', "a pyproject.toml table, not a program"),
    ("docs/streaming.md", "LoaderStallWarning: the training loop has waited", "a warning's text, not a program"),
    (
        "docs/tracing.md",
        "LITDATA_TRACE_LEVEL=chunk LITDATA_LOG_FILE=/tmp/run.log python train.py",
        "runs the reader's train.py; packages/litdata-io/tests test the variables",
    ),
    ("docs/tracing.md", "ts: 1717000000123456.789; pid: 4242", "a log line shown, not a program"),
    (
        "docs/tracing.md",
        "litracer litdata_debug.log                       # ->",
        "the litracer command: tools/litracer/tests/test_litracer.py runs each option on a real log",
    ),
)


def _python_blocks() -> list[CodeBlock]:
    return [b for page in PAGES for b in code_blocks(page) if b.lang == "python"]


def _find(page: str, key: str, blocks: list[CodeBlock]) -> CodeBlock:
    found = [b for b in blocks if b.page == page and key in b.text]
    assert len(found) == 1, f"{page}: {len(found)} Python blocks hold {key!r}; update BLOCKS in {Path(__file__).name}"
    return found[0]


def _plan(block: CodeBlock) -> Block:
    listed = [b for b in BLOCKS if b.page == block.page and b.key in block.text]
    assert len(listed) <= 1, listed
    return listed[0] if listed else Block(block.page, block.text.splitlines()[0])


def script(block: CodeBlock, blocks: list[CodeBlock], values: dict[str, str] | None = None) -> str:
    """What runs: the names given it, the earlier blocks it continues, its own text (guarded if the plan says so),
    with the plan's subs."""
    plan = _plan(block)
    parts = [plan.given]
    for ref in plan.after:
        page, _, key = ref.rpartition("::")
        parts.append(_find(page or plan.page, key, blocks).text)
    own = block.text
    if plan.guard_from is not None:
        lines = own.splitlines(True)
        start = next(i for i, line in enumerate(lines) if line.startswith(plan.guard_from))
        tail = "".join(f"    {line}" if line.strip() else line for line in lines[start:])
        own = "".join(lines[:start]) + 'if __name__ == "__main__":\n' + tail
    parts.append(own)
    text = "\n".join(p for p in parts if p)
    for old, new in plan.subs:
        assert old in text, f"{block.page}:{block.line}: {old!r} is not in the block"
        local = new
        for name, value in (values or {}).items():
            local = local.replace("{" + name + "}", value)
        text = text.replace(old, local)
    return text


# --- the user's data -----------------------------------------------------------------------------------


def _png(size: tuple[int, int], color: int) -> bytes:
    out = BytesIO()
    Image.new("RGB", size, (color, 0, 255 - color)).save(out, format="PNG")
    return out.getvalue()


def _dataset(folder: Path, samples: list[object], **kwargs: object) -> Path:
    writer = BinaryWriter(folder, chunk_size=kwargs.pop("chunk_size", 16), **kwargs)  # type: ignore[arg-type]
    for i, sample in enumerate(samples):
        writer.add_item(i, sample)
    writer.done()
    writer.merge()
    return folder


def _parquet_files(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f, name in enumerate(names):
        ids = list(range(f * 10, (f + 1) * 10))
        pq.write_table(pa.table({"id": ids, "text": [f"row {i}" for i in ids]}), folder / name)


def _downloaded(w: World) -> None:
    _dataset(w.cwd / "downloaded", [{"index": i} for i in range(10)])


def _records(w: World) -> None:
    _dataset(w.cwd / "records", [{"id": f"user-{i}", "name": "x", "visits": 1} for i in range(100)])


def _two_token_datasets(w: World) -> None:
    w.bucket("my-bucket")
    for prefix, first, blocks in (("slimpajama/train", 0, 40), ("starcoder", 1000, 20)):
        folder = w.cwd.parent / "made" / prefix
        _dataset(folder, [np.full(2049, first + i, dtype=np.int32) for i in range(blocks)],
                 chunk_size=2049 * 4, item_loader=TokensLoader())  # fmt: skip
        w.upload(folder, f"s3://my-bucket/{prefix}")


def _two_inputs_and_input_dir(w: World) -> None:
    SETUPS["two_inputs"](w)
    _dataset(w.cwd / "input_dir", list(range(30)))


def _text_raw(w: World) -> None:
    w.bucket("bucket")
    folder = _dataset(w.cwd.parent / "made" / "raw", [{"text": "word " * (i % 50)} for i in range(200)])
    w.upload(folder, "s3://bucket/raw")


def _two_to_merge(w: World) -> None:
    w.bucket("bucket")
    _dataset(w.cwd / "fast_data_1", [{"index": i} for i in range(20)])
    w.upload(_dataset(w.cwd.parent / "made" / "fd2", [{"index": i} for i in range(20, 50)]), "s3://bucket/fast_data_2")


def _parquet_globs(w: World) -> None:
    w.bucket("bucket")
    made = w.cwd.parent / "made" / "pq"
    _parquet_files(made, [f"train-{i:05d}-of-00002.parquet" for i in range(2)] + ["test-00000-of-00001.parquet"])
    w.upload(made, "s3://bucket/data")
    _parquet_files(w.cwd / "data" / "shards", [f"part-000{i}.parquet" for i in range(5)])
    _parquet_files(w.hf.dataset_repo("org/name") / "data", ["test-00000-of-00001.parquet"])


def _uri_schemes_and_http(w: World) -> None:
    SETUPS["uri_schemes"](w)  # s3, gs, azure, the Hub and local folders, as upstream's list of schemes needs
    shutil.copytree(w.cwd / "var" / "data" / "fast_data", w.cwd.parent / "www" / "datasets" / "fast_data")


def _images(w: World) -> None:
    w.bucket("my-bucket")
    for i in range(40):
        w.put("my-bucket", f"images/{i:03d}.png", _png((40 + i, 30 + i), i * 5))


SETUPS_HERE: dict[str, Callable[[World], None]] = {
    "downloaded": _downloaded,
    "records": _records,
    "two_token_datasets": _two_token_datasets,
    "two_inputs_and_input_dir": _two_inputs_and_input_dir,
    "text_raw": _text_raw,
    "two_to_merge": _two_to_merge,
    "parquet_globs": _parquet_globs,
    "images": _images,
    "uri_schemes_and_http": _uri_schemes_and_http,
}


# --- the tests ---------------------------------------------------------------------------------------


s3 = module_servers.s3
hf = module_servers.hf
gcs = module_servers.gcs
azure = module_servers.azure


@pytest.fixture(scope="module")
def my_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _dataset(tmp_path_factory.mktemp("my-data") / "my-data", list(range(10_000)), chunk_size=1000)


def _continued(blocks: list[CodeBlock]) -> set[CodeBlock]:
    """The blocks another block continues: they run, unchanged, as the first part of that one's script."""
    return {
        _find(page or plan.page, key, blocks)
        for plan in BLOCKS
        if not plan.cannot
        for page, _, key in (ref.rpartition("::") for ref in plan.after)
    }


def _marks(plan: Block) -> list[pytest.MarkDecorator]:
    """slow: a process of its own, often workers; cloud: its data is in a local server's bucket or repo."""
    return [pytest.mark.slow, *([pytest.mark.cloud] if plan.servers or plan.setup else [])]


def _params() -> list[object]:
    """One test per block that runs, but for a block another continues: that one's script runs it."""
    blocks = _python_blocks()
    continued = _continued(blocks)
    return [
        pytest.param(block, id=f"{block.page}:{block.line}", marks=_marks(_plan(block)))
        for block in blocks
        if not _plan(block).cannot and block not in continued
    ]


@pytest.mark.parametrize("block", _params())
def test_block_runs_as_written(
    block: CodeBlock, tmp_path: Path, s3: S3Server, hf: HfHubServer, my_data: Path, request: pytest.FixtureRequest
) -> None:
    plan = _plan(block)
    urllib.request.urlopen(urllib.request.Request(f"{s3.endpoint}/moto-api/reset", method="POST"), timeout=10).close()
    cwd = tmp_path / "run"
    cwd.mkdir()
    world = World(cwd=cwd, s3=s3, hf=hf, my_data=my_data)
    values = {"cwd": str(cwd), "s3_endpoint": s3.endpoint, "s3_key": s3.access_key, "s3_secret": s3.secret_key}
    if "gs" in plan.servers:  # started only for the blocks that use them
        world.gcs = request.getfixturevalue("gcs")
    if "azure" in plan.servers:
        azure: AzuriteServer = request.getfixturevalue("azure")
        world.azure = azure
        values |= {"azure_url": azure.endpoint, "azure_key": azure.account_key}
    www = tmp_path / "www"
    www.mkdir()
    if plan.setup:
        (SETUPS_HERE.get(plan.setup) or SETUPS[plan.setup])(world)
    home = tmp_path / "home"
    env = {
        "LITDATA_CACHE_DIR": str(home / "litdata-cache"),
        "HF_HOME": str(home / "hf"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_ACCESS_KEY_ID": s3.access_key,
        "AWS_SECRET_ACCESS_KEY": s3.secret_key,
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_REGION": s3.region,
        **hf.env,
    }
    if world.gcs is not None:
        env["STORAGE_EMULATOR_HOST"] = world.gcs.endpoint
    with serve_folder(www) if "http" in plan.servers else contextlib.nullcontext("") as http_url:
        out = run_example(script(block, _python_blocks(), {**values, "http_url": http_url}), cwd, env)
    for text in plan.expect:
        assert text in out, f"{text!r} not in the block's output:\n{out[-3000:]}"


def test_every_block_is_accounted_for() -> None:
    """Each listed block exists once; a block that cannot run says why; every non-Python block is listed."""
    blocks = _python_blocks()
    for plan in BLOCKS:
        _find(plan.page, plan.key, blocks)
        assert not (plan.cannot and (plan.after or plan.given or plan.setup)), plan
        assert plan.setup is None or plan.setup in SETUPS_HERE or plan.setup in SETUPS, plan
    others = [b for page in PAGES for b in code_blocks(page) if b.lang != "python"]
    for block in others:
        why = [r for page, key, r in NOT_PYTHON if page == block.page and key in block.text]
        assert why, f"{block.page}:{block.line}: a {block.lang or 'plain'} block neither run nor listed in NOT_PYTHON"
    for page, key, _ in NOT_PYTHON:
        assert any(b.page == page and key in b.text for b in others), (page, key)
    for block in _continued(blocks):
        assert not _plan(block).cannot and not _plan(block).guard_from, block  # it runs as written in the other's
    cannot = [p for p in BLOCKS if p.cannot]
    print(f"{len(blocks) - len(cannot)} of {len(blocks)} Python blocks run; {len(others)} other blocks listed")
