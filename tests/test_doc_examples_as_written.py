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
interpreter is once those lines ran (see ``run_example`` in ``tests/support/doc_worlds.py``); if those
lines import torch-geometric too, from a second zygote that imported it as well (started with the
module, so it imports while the examples before the first that needs it run). ``LITDATA_TEST_FORK=0``
runs every example in a fresh interpreter.

An example that mostly waits by design and needs no server (:data:`BACKGROUND`) starts with the
file's first example, in a folder of its own, and runs while the others do; its test takes its
output once it is done and checks it as any other's.
"""

from __future__ import annotations

import os
import shutil
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import module_servers
from tests.support.doc_examples import EXAMPLES, FOLDER, SHELL, STATUSES, Example, runnable_script, verbatim
from tests.support.doc_worlds import (
    PRELOADABLE,
    SETUPS,
    World,
    import_lines,
    loads_torch_first,
    numbers,
    preloadable,
    run_example,
)
from tests.support.selected import selected_params
from tests.support.servers import S3Server
from tests.support.servers_extra import (
    HfHubServer,
)
from tests.support.zygote import start_zygote

_REPO = Path(__file__).resolve().parent.parent
# Upstream's documentation text: $LITDATA_DOCS_TXT, else the project's shared folder beside the checkout.
DOCS = Path(os.environ.get("LITDATA_DOCS_TXT") or _REPO.parent / "shared" / "LITDATA-DOCS.txt")

# The pinned counts: every code block of the docs is in the inventory.
PYTHON_EXAMPLES = 67
SHELL_BLOCKS = 15
RUNNABLE = 41
PENDING: list[
    int
] = []  # runnable offline with the allowed changes, not a test yet (tests/support/doc_examples.py says why)

# Examples that wait most of their run and use no server, setup or earlier example: run in the background.
BACKGROUND = {25: "a producer sleeping 10 ms per item, 1000 items: 10 s"}


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
    return numbers(tmp_path_factory.mktemp("my-data") / "my-data", 100_000)


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
