"""The inventory of every code example in upstream LitData's user docs (``LITDATA-DOCS.txt``).

The docs are plain text (no code fences): an example is a run of code lines between two lines of
prose. There are 67 Python examples and 15 shell blocks. Each one's text is committed verbatim in
``tests/fixtures/doc_examples/`` (the file's two header lines name the docs lines; everything after
them is the docs' text, byte for byte), and each has one entry below with its status:

- ``as_written``: runs unchanged. Where it names a bucket, the environment points the standard
  variables (``AWS_ENDPOINT_URL``, ``HF_ENDPOINT``, ...) at a local server holding that bucket, as a
  user's machine points them at the real service.
- ``guarded``: the only change is an ``if __name__ == "__main__":`` guard over the lines from
  ``guard_from`` on (the example starts spawned workers at import time, which re-import it).
- ``local_url``: the only changes are ``subs``: a placeholder endpoint, key or folder of the
  docs (``"your_endpoint_url"``, ``"/path/to/cache"``) becomes the local server's or a folder in the
  test's working directory (and a guard, if ``guard_from`` is set).
- ``offline_impossible``: cannot run offline with those changes; ``reason`` says exactly why.

An example that continues an earlier one (its names, an import or a ``dataset``, come from an
example before it in the docs) lists that one in ``after``: it runs as the user runs it, the earlier
example's text (with that example's own changes) followed by its own, in one script, each part
verbatim from the docs. ``after`` names the nearest earlier examples that define what it uses.
- ``pending``: could run with those changes but is not a test yet (``reason`` says what it needs);
  the count test pins the list, so it only shrinks.

``tests/test_doc_examples_as_written.py`` runs every example that is not ``offline_impossible`` (or ``pending``) in
a fresh interpreter, checks the committed text against the docs when the docs file is present, and
pins the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["EXAMPLES", "FOLDER", "SHELL", "Example", "ShellBlock", "runnable_script", "verbatim"]

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "doc_examples"
STATUSES = ("as_written", "guarded", "local_url", "offline_impossible", "pending")
_HEADER_LINES = 2

# Placeholders a substitution's replacement may use; the test fills them in.
S3_ENDPOINT = "{s3_endpoint}"
S3_KEY = "{s3_key}"
S3_SECRET = "{s3_secret}"
CWD = "{cwd}"
AZURE_URL = "{azure_url}"
AZURE_KEY = "{azure_key}"


@dataclass(frozen=True)
class Example:
    """One Python example of the docs.

    Attributes:
        number: its place among the docs' Python examples (1-67), the fixture file's prefix.
        slug: the rest of the fixture file's name.
        lines: the docs lines it spans (first, last).
        status: one of ``STATUSES``.
        reason: for ``offline_impossible``, why; otherwise what the example needs from the test.
        guard_from: the start of the first line (stripped) that goes under the ``__main__`` guard.
        subs: ``(docs text, replacement)`` pairs; each docs text must occur in the example.
        servers: local servers the example uses (``s3``, ``gs``, ``azure``, ``hf``); ``s3``, ``gs`` and
            ``hf`` are reached through the standard environment variables.
        setup: the name of the test's input-making function, run in the empty folder first.
        expect: substrings the example's stdout must contain.
        after: the earlier examples it continues, whose text runs before its own in the same script.
    """

    number: int
    slug: str
    lines: tuple[int, int]
    status: str
    reason: str = ""
    guard_from: str | None = None
    subs: tuple[tuple[str, str], ...] = ()
    servers: tuple[str, ...] = ()
    setup: str | None = None
    expect: tuple[str, ...] = ()
    after: tuple[int, ...] = ()

    @property
    def path(self) -> Path:
        """The committed verbatim text."""
        return FOLDER / f"{self.number:02d}_{self.slug}.py"

    @property
    def runs(self) -> bool:
        """Whether the test runs it."""
        return self.status not in ("offline_impossible", "pending")


@dataclass(frozen=True)
class ShellBlock:
    """One shell block of the docs (not counted among the examples); ``covered`` says where it runs."""

    number: int
    slug: str
    lines: tuple[int, int]
    covered: str

    @property
    def path(self) -> Path:
        """The committed verbatim text."""
        return FOLDER / f"shell_{self.number:02d}_{self.slug}.sh"


def verbatim(path: Path) -> str:
    """The docs' text of a committed example (its header lines dropped)."""
    return path.read_text(encoding="utf-8").split("\n", _HEADER_LINES)[_HEADER_LINES].removesuffix("\n")


def runnable_script(example: Example, values: dict[str, str]) -> str:
    """The script the test runs: the ``after`` examples' texts, then the example's; each part gets its own changes."""
    by_number = {e.number: e for e in EXAMPLES}
    return "".join(_changed(by_number[n], values) for n in (*example.after, example.number))


def _changed(example: Example, values: dict[str, str]) -> str:
    """One example's text with its allowed changes applied: ``subs`` (placeholders from ``values``), then the guard."""
    text = verbatim(example.path)
    for old, new in example.subs:
        assert text.count(old) >= 1, f"example {example.number}: {old!r} is not in the docs' text"
        local = new
        for name, value in values.items():
            local = local.replace("{" + name + "}", value)
        text = text.replace(old, local)
    if example.guard_from is None:
        return text + "\n"
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip().startswith(example.guard_from)]
    assert len(starts) == 1, f"example {example.number}: guard line {example.guard_from!r} found {len(starts)} times"
    head, tail = lines[: starts[0]], lines[starts[0] :]
    body = [("    " + line) if line.strip() else "" for line in tail]
    return "\n".join([*head, 'if __name__ == "__main__":', *body]) + "\n"


_NEEDS = "needs surrounding code: "
_EXISTS = (
    "optimize refuses an output_dir that holds a dataset (datasets are immutable; no mode= is given; upstream 0.2.76 "
    "refuses it too)"
)
_TEAMSPACE = "a Lightning Studio path (/teamspace/...) resolves only inside a Studio"

EXAMPLES: tuple[Example, ...] = (
    Example(1, "raw_quick_start", (25, 41), "offline_impossible",
            _NEEDS + "calls the user's train_step (undefined); and torch's default collate cannot batch the PIL "
            "images its transform returns (upstream neither)"),
    Example(2, "raw_group_files", (49, 74), "as_written", "image + mask pairs under s3://bucket/seg/",
            servers=("s3",), setup="seg_pairs"),
    Example(3, "raw_recompute_index", (83, 84), "as_written",
            "continues example 2 (StreamingRawDataset is imported there); files under s3://bucket/files/",
            servers=("s3",), setup="raw_files", after=(2,)),
    Example(4, "raw_bytes", (97, 100), "as_written",
            "continues example 2 (StreamingRawDataset is imported there); files under s3://bucket/files/",
            servers=("s3",), setup="raw_files", after=(2,)),
    Example(5, "stream_quick", (123, 129), "offline_impossible",
            _NEEDS + "calls the user's process(batch) (undefined: 'Replace with your data processing logic')"),
    Example(6, "storage_options", (133, 142), "local_url", "the docs' placeholder endpoint and keys become moto's",
            subs=(("your_endpoint_url", S3_ENDPOINT), ("your_access_key_id", S3_KEY),
                  ("your_secret_access_key", S3_SECRET)),
            setup="my_data_no_env"),
    Example(7, "cache_dir", (146, 149), "local_url",
            "the placeholder cache folder /path/to/cache becomes path/to/cache in the working folder",
            subs=(('"/path/to/cache"', '"' + CWD + '/path/to/cache"'),), servers=("s3",), setup="my_data"),
    Example(8, "optimize_jpeg", (157, 163), "offline_impossible",
            _NEEDS + "list_of_paths is the user's (undefined)"),
    Example(9, "custom_serializer", (173, 189), "as_written", "a dataset at s3://bucket/data",
            servers=("s3",), setup="bucket_data"),
    Example(10, "pyg_gcn", (199, 233), "guarded",
            "torch-geometric installed; 1,024 graphs as written. It calls optimize at import time: workers that "
            "import the script (spawn, upstream's default; here a forkserver when another thread runs) would run it "
            "again",
            guard_from='optimize(make_graph, inputs=list(range(1024)), output_dir="graphs", chunk_size=64)'),
    Example(11, "graph_wrapper", (237, 249), "offline_impossible",
            "continues example 10 (torch is imported there), but writes output_dir=\"graphs\", which 10 has just "
            "filled: " + _EXISTS + ". Run after 10 (both optimize calls guarded) it stops with DatasetExistsError"),
    Example(12, "heterodata", (255, 277), "guarded",
            "continues example 10 (torch is imported there; 10 keeps its guard); its own optimize call at import "
            "time goes under a second guard, for the same reason",
            guard_from='optimize(make_hetero, inputs=list(range(512)), output_dir="hetero", chunk_size=32)',
            expect=("torch.Size([8, 16]) torch.Size([2, 4])",), after=(10,)),
    Example(13, "graph_metadata", (281, 287), "guarded",
            "continues example 10 (make_graph, optimize, StreamingDataLoader, StreamingDataset; 10 keeps its guard); "
            "its own optimize call at import time goes under a second guard, for the same reason",
            guard_from='optimize(make_row, inputs=list(range(1024)), output_dir="rows")', after=(10,)),
    Example(14, "subgraphs", (293, 299), "offline_impossible",
            _NEEDS + "sampler and train_seeds are defined nowhere in the docs (the sampler line is commented out; "
            "Data, torch and optimize would come from example 10)"),
    Example(15, "mds", (313, 327), "as_written", "MosaicML MDS shards at s3://my-bucket/my-mds-data",
            servers=("s3",), setup="mds", expect=("Sample",)),
    Example(16, "hf_stream", (358, 370), "guarded",
            "a Parquet dataset repo on the Hub stand-in; the loader spawns 4 workers, which re-import the script",
            guard_from="dataset = ld.StreamingDataset(hf_dataset_uri)",
            servers=("hf",), setup="hf_clevr", expect=("Sample",)),
    Example(17, "hf_index", (376, 379), "as_written", "a Parquet dataset repo on the Hub stand-in",
            servers=("hf",), setup="hf_clevr"),
    Example(18, "hf_index_path", (383, 391), "as_written", "a Parquet dataset repo on the Hub stand-in",
            servers=("hf",), setup="hf_openthoughts"),
    Example(19, "train_val", (405, 418), "offline_impossible",
            _NEEDS + "calls the user's process(batch) (undefined)"),
    Example(20, "shuffle_seed", (431, 442), "as_written", "a dataset at s3://my-bucket/train",
            servers=("s3",), setup="my_train"),
    Example(21, "cloud_providers", (485, 530), "offline_impossible",
            _NEEDS + "uses botocore without importing it, and no example before it imports botocore (NameError "
            "before its second StreamingDataset)"),
    Example(22, "resume", (538, 555), "as_written", "100,000 samples at s3://my-bucket/my-data; os.cpu_count() workers",
            servers=("s3",), setup="my_data"),
    Example(23, "canonical_nodes", (559, 559), "as_written",
            "continues example 22 (StreamingDataset is imported there); 100,000 samples at s3://my-bucket/my-data",
            servers=("s3",), setup="my_data", after=(22,)),
    Example(24, "optimize_random_images", (565, 585), "as_written", "1,000 images, 4 workers"),
    Example(25, "optimize_queue", (605, 639), "as_written", "a producer sleeping 10 ms per item: 10 s as written"),
    Example(26, "tokenize_slimpajama", (649, 698), "offline_impossible",
            "imports lit-gpt's tokenizer.Tokenizer with Llama-2 weights and reads the SlimPajama-627B download"),
    Example(27, "filter_yield", (702, 725), "as_written", expect=("[0, 2, 4, 6, 8, 10,", "994, 996, 998]")),
    Example(28, "filter_try", (729, 750), "as_written", expect=("[1.0, 0.5, 0.25]",)),
    Example(29, "combined", (756, 788), "as_written",
            "two token datasets at s3://tinyllama-template/{slimpajama/train,starcoder}; os.cpu_count() workers",
            servers=("s3",), setup="tinyllama"),
    Example(30, "batching_stratified", (796, 799), "offline_impossible",
            _NEEDS + "dataset1 and dataset2 are defined nowhere in the docs (example 29, before it, builds "
            "train_datasets); CombinedStreamingDataset would come from 29"),
    Example(31, "batching_per_stream", (803, 806), "offline_impossible",
            _NEEDS + "dataset1 and dataset2 are defined nowhere in the docs (example 29, before it, builds "
            "train_datasets); CombinedStreamingDataset would come from 29"),
    Example(32, "parallel", (812, 825), "as_written", "two optimized folders input_dir_1, input_dir_2",
            setup="two_inputs"),
    Example(33, "parallel_transform", (829, 838), "offline_impossible",
            _NEEDS + "dset_1 and dset_2 are defined nowhere in the docs (example 32, before it, builds its datasets "
            "inline), and Tuple and Any are not imported by it or any example before it"),
    Example(34, "parallel_rngs", (842, 847), "offline_impossible",
            _NEEDS + "dset_1 and dset_2 are defined nowhere in the docs (example 32 builds its datasets inline), and "
            "Tuple, Dict and Any are not imported by it or any example before it"),
    Example(35, "parallel_cycle", (853, 865), "offline_impossible",
            "a SyntaxError in the docs: print(len(cycled_dataset))) has one ')' too many"),
    Example(36, "merge", (871, 895), "as_written", "4 x 250 images, 4 workers each", expect=("1000",)),
    Example(37, "complete_dataset", (899, 902), "as_written", "a folder my_chunks with only {rank}.index.json files",
            setup="rank_chunks"),
    Example(38, "transform_fn", (908, 923), "offline_impossible",
            _NEEDS + "data_dir, cache_dir and shuffle are defined nowhere in the docs; transforms (torchvision's) and "
            "StreamingDataset are not imported"),
    Example(39, "transform_subclass", (927, 948), "offline_impossible",
            _NEEDS + "data_dir, cache_dir and shuffle are defined nowhere in the docs; StreamingDataset and "
            "transforms (torchvision's) are not imported"),
    Example(40, "train_test_split", (952, 968), "as_written", "100,000 samples at s3://my-bucket/my-data",
            servers=("s3",), setup="my_data", expect=("100000",)),
    Example(41, "subset", (972, 973), "as_written",
            "continues example 40 (its dataset); 100,000 samples at s3://my-bucket/my-data",
            servers=("s3",), setup="my_data", expect=("100000",), after=(40,)),
    Example(42, "subsample", (977, 985), "as_written", "100,000 samples at s3://my-bucket/my-data",
            servers=("s3",), setup="my_data", expect=("1000",)),
    Example(43, "subsample_repeat", (989, 994), "as_written", "100,000 samples at s3://my-bucket/my-data",
            servers=("s3",), setup="my_data", expect=("250000",)),
    Example(44, "append", (1000, 1025), "as_written", "its own asserts check the order after append"),
    Example(45, "parquet_index", (1044, 1051), "as_written", "Parquet files at s3://my-bucket/my-parquet-data",
            servers=("s3",), setup="parquet"),
    Example(46, "parquet_stream", (1064, 1087), "guarded",
            "Parquet files at s3://my-bucket/my-parquet-data; the loader spawns 4 workers, which re-import the script",
            guard_from='uri = "s3://my-bucket/my-parquet-data"', servers=("s3",), setup="parquet",
            expect=("'id': 0",)),
    Example(47, "parquet_map", (1095, 1107), "offline_impossible",
            _NEEDS + "list_of_parquet_paths is defined nowhere in the docs (process's body '...' would run)"),
    Example(48, "compression", (1113, 1127), "as_written"),
    Example(49, "len_getitem", (1133, 1139), "as_written", "100,000 samples at s3://my-bucket/my-data",
            servers=("s3",), setup="my_data", expect=("100000", "42")),
    Example(50, "getitem_subclass", (1145, 1159), "offline_impossible",
            "passes '...' as the dataset's arguments (StreamingDataset(...) raises TypeError: not a path, URL or Dir; "
            "upstream fails too); it also imports torchvision, not a dependency here (it would add only its 7.6 MB "
            "wheel, but no example would run with it: 38, 39 and 50 lack other names or arguments)"),
    Example(51, "profile_viztracer", (1171, 1186), "offline_impossible",
            _NEEDS + "calls the user's train_step (undefined)"),
    Example(52, "profile_cprofile", (1207, 1217), "offline_impossible",
            _NEEDS + "continues example 51 (dataset, StreamingDataLoader), which cannot run; both call the user's "
            "train_step, defined nowhere in the docs"),
    Example(53, "tokenize_parquet", (1232, 1256), "offline_impossible",
            "imports lit-gpt's tokenizer.Tokenizer with Llama-2 weights and reads /teamspace/s3_connections (Studio)"),
    Example(54, "cache_size", (1268, 1274), "as_written", "100,000 samples at s3://my-bucket/my-data",
            servers=("s3",), setup="my_data"),
    Example(55, "async_loop", (1280, 1281), "offline_impossible",
            _NEEDS + "calls the user's train_step, defined nowhere in the docs; dataset and StreamingDataLoader are "
            "not defined by it"),
    Example(56, "cache_dir_dir", (1302, 1309), "local_url",
            "the placeholder cache folder /path/to/your/cache becomes a folder in the working folder",
            subs=(('"/path/to/your/cache"', '"' + CWD + '/path/to/your/cache"'),), servers=("s3",),
            setup="my_optimized_dataset"),
    Example(57, "local_network_drive", (1324, 1326), "local_url",
            "the network drive /data/shared-drive/some-data becomes a folder in the working folder",
            subs=(("local:/data/shared-drive/some-data", "local:" + CWD + "/data/shared-drive/some-data"),),
            setup="shared_drive"),
    Example(58, "multi_node", (1339, 1353), "offline_impossible",
            "launches a Lightning multi-node job (num_nodes=32, Machine from lightning_sdk) and writes to /teamspace"),
    Example(59, "teamspace_stream", (1357, 1360), "offline_impossible", _TEAMSPACE),
    Example(60, "fernet", (1368, 1390), "guarded",
            "the bucket my-bucket (empty). Its last two lines load fernet.pem at import time, after the guard: a "
            "worker that imports the script (spawn, upstream's default; forkserver, this one's on Linux) runs them "
            "before the file exists; they go under a second guard",
            guard_from='fernet = FernetEncryption.load("fernet.pem", password="your_secure_password")',
            servers=("s3",), setup="my_bucket"),
    Example(61, "rsa", (1394, 1401), "offline_impossible",
            "continues example 60 (optimize, fn, data_dir, StreamingDataset), but writes into the same data_dir, "
            "s3://my-bucket/optimized_data, which 60 has just filled: " + _EXISTS + ". Run after 60 (its optimize "
            "guarded) it stops with DatasetExistsError"),
    Example(62, "tracer", (1409, 1420), "as_written", "100,000 samples at s3://my-bucket/my-data; 8 workers",
            servers=("s3",), setup="my_data"),
    Example(63, "uri_schemes", (1457, 1466), "local_url",
            "a dataset at each URL: moto (s3://, r2://), fake-gcs through STORAGE_EMULATOR_HOST (gs://), Azurite, "
            "the Hub stand-in; the two storage_options={...} placeholders (a set holding Ellipsis) become moto's "
            "and Azurite's options, the folders /data/shared-drive/some-data and /var/data/fast_data folders of the "
            "working folder",
            subs=(('StreamingDataset("r2://my-bucket/fast_data", storage_options={...})',
                   'StreamingDataset("r2://my-bucket/fast_data", storage_options={"endpoint_url": "' + S3_ENDPOINT
                   + '", "aws_access_key_id": "' + S3_KEY + '", "aws_secret_access_key": "' + S3_SECRET + '"})'),
                  ('StreamingDataset("azure://my-container/fast_data", storage_options={...})',
                   'StreamingDataset("azure://my-container/fast_data", storage_options={"account_url": "'
                   + AZURE_URL + '", "credential": "' + AZURE_KEY + '"})'),
                  ("local:/data/shared-drive/some-data", "local:" + CWD + "/data/shared-drive/some-data"),
                  ('"/var/data/fast_data"', '"' + CWD + '/var/data/fast_data"')),
            servers=("s3", "gs", "azure", "hf"), setup="uri_schemes"),
    Example(64, "resolver_dir", (1474, 1481), "local_url",
            "the placeholder cache folder /fast-ssd/cache/run-1 becomes a folder in the working folder",
            subs=(('"/fast-ssd/cache/run-1"', '"' + CWD + '/fast-ssd/cache/run-1"'),), servers=("s3",),
            setup="fast_data"),
    Example(65, "date_template", (1491, 1497), "offline_impossible",
            _NEEDS + "fn and inputs are the user's (no example before it on its page defines them); optimize is not "
            "imported"),
    Example(66, "teamspace_paths", (1503, 1523), "offline_impossible", _TEAMSPACE),
    Example(67, "map_resize", (1535, 1552), "as_written",
            "a folder my_large_images of images and the bucket my-bucket; 8 workers", servers=("s3",),
            setup="large_images"),
)  # fmt: skip

SHELL: tuple[ShellBlock, ...] = (
    ShellBlock(1, "install_extras", (5, 5), "tests/scripts/install_matrix.py (the litdata[extras] install)"),
    ShellBlock(2, "install_cloud", (19, 21), "installs from PyPI (network); docs/doc-examples.md exception 1"),
    ShellBlock(3, "install_hf", (348, 352), "installs from PyPI (network); docs/doc-examples.md exception 1"),
    ShellBlock(4, "bench_node_queue", (595, 595), "tests/test_bench_node_queue.py (scripts/bench/bench_node_queue.py)"),
    ShellBlock(5, "install_parquet", (1037, 1040), "installs from PyPI (network)"),
    ShellBlock(6, "install_viztracer", (1165, 1165), "installs from PyPI (network); viztracer is a dev dependency"),
    ShellBlock(7, "view_trace", (1192, 1196), "comments only (open a browser)"),
    ShellBlock(8, "pstats", (1219, 1220), "tests/test_doc_examples_stream.py::test_profiling_with_cprofile"),
    ShellBlock(9, "async_env", (1287, 1294), "packages/litdata-io/tests/test_prefetch.py"),
    ShellBlock(10, "cache_env", (1313, 1313), "packages/litdata/tests/test_cli.py"),
    ShellBlock(11, "cache_cli", (1317, 1318), "packages/litdata/tests/test_cli.py"),
    ShellBlock(12, "trace_train", (1428, 1428), "the user's train.py"),
    ShellBlock(13, "build_litracer", (1433, 1434), "clones from GitHub (network); Litracer is tools/litracer here"),
    ShellBlock(14, "litracer_convert", (1441, 1443), "tests/test_doc_examples_misc.py::test_tracer_and_litracer"),
    ShellBlock(15, "cache_env_cli", (1483, 1485), "packages/litdata/tests/test_cli.py"),
)
