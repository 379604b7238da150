"""The install matrix: each package of the workspace installed alone, as a user installs it, and used.

CI runs it before the test suite (the suite runs in one venv holding everything, where a missing
dependency declaration goes unnoticed)::

    uv run python tests/scripts/install_matrix.py              # every package
    uv run python tests/scripts/install_matrix.py litdata-io   # some of them

It builds the wheels (``uv build --all-packages``), then for each package makes a fresh venv
(``uv venv``) and installs that package alone by name, as a user does with a folder of wheels:
``uv pip install --find-links dist litdata[extras]``, plus what its own metadata declares. The
third-party packages are pinned to the versions in ``uv.lock`` (``uv export`` as constraints), so
they come from uv's cache as in the dev venv (torch included) and nothing new is downloaded. Our own
packages are not pinned: the index offers upstream's ``litdata`` (0.2.76 and older) beside the
folder's, and the check that the venv holds the version just built is the check that a folder of
our wheels wins (the version scheme is in the README, *Versions*). The venv must also hold what the
package's README says it brings and lack what it says it does not (``brings``, ``lacks``). Then a
smoke script runs in that venv doing what a user of the package does. The S3 server
(``moto_server``) and the tracer that writes litracer's input run from the dev venv, as separate
processes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make ``tests.support.servers`` importable
    sys.path.insert(0, str(ROOT))

from tests.support.servers import start_moto  # noqa: E402

# Shared by the smoke scripts: a small dataset written with litdata-format.
WRITE = """
import sys
from pathlib import Path
import numpy as np
from litdata_format import BinaryWriter, DatasetReader

def write(folder, n=100):
    writer = BinaryWriter(str(folder), chunk_size=16, compression="zstd")
    for i in range(n):
        writer.add_item(i, {"index": i, "tokens": np.full(4, i % 7, dtype=np.int32), "name": f"s{i}"})
    writer.done()
    writer.merge()

def check_read(folder, n=100):
    reader = DatasetReader(str(folder))
    samples = sorted((reader[i] for i in range(len(reader))), key=lambda s: s["index"])
    assert [s["index"] for s in samples] == list(range(n)), [s["index"] for s in samples]
    assert all(s["name"] == f"s{s['index']}" and s["tokens"].tolist() == [s["index"] % 7] * 4 for s in samples)

def assert_no_torch():
    import importlib.util
    assert "torch" not in sys.modules, "torch was imported"
    assert importlib.util.find_spec("torch") is None, "torch is installed: a dependency brought it"

work = Path(sys.argv[1])
"""

FORMAT = (
    WRITE
    + """
write(work / "ds")
check_read(work / "ds")
assert_no_torch()
"""
)

IO = (
    WRITE
    + """
import os
from litdata_io import get_storage

write(work / "ds")
local = get_storage(str(work / "ds"))
names = sorted(info.key for info in local.list(""))
assert "index.json" in names and any(n.endswith(".bin") for n in names), names
assert local.get("index.json") == (work / "ds" / "index.json").read_bytes()

options = {k: os.environ[v] for k, v in [("endpoint_url", "S3_ENDPOINT"), ("aws_access_key_id", "S3_KEY"),
                                         ("aws_secret_access_key", "S3_SECRET"), ("region_name", "S3_REGION")]}
remote = get_storage(f"s3://{os.environ['S3_BUCKET']}/ds", options)
for name in names:
    remote.upload(work / "ds" / name, name)
assert sorted(info.key for info in remote.list("")) == names
assert remote.get_range(names[0], 2, 10) == (work / "ds" / names[0]).read_bytes()[2:10]
for name in names:
    remote.download(name, work / "back" / name)
check_read(work / "back")
remote.delete(names[0])
assert not remote.exists(names[0])
assert_no_torch()
"""
)

STREAM = (
    WRITE
    + """
from litdata_stream import StreamingDataLoader, StreamingDataset

if __name__ == "__main__":
    write(work / "ds")
    loader = StreamingDataLoader(StreamingDataset(str(work / "ds"), shuffle=True), batch_size=10, num_workers=2)
    seen = [int(i) for batch in loader for i in batch["index"]]
    assert sorted(seen) == list(range(100)), seen
"""
)

RAW = """
import sys
from pathlib import Path
import torch
from litdata_raw import StreamingRawDataset

if __name__ == "__main__":
    folder = Path(sys.argv[1]) / "files"
    (folder / "sub").mkdir(parents=True)
    files = {folder / ("sub" if i % 2 else "") / f"f{i}.bin": bytes([i]) * (i + 1) for i in range(20)}
    for path, data in files.items():
        path.write_bytes(data)
    dataset = StreamingRawDataset(str(folder))
    assert len(dataset) == 20
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=list)
    got = sorted(bytes(item) for batch in loader for item in batch)
    assert got == sorted(files.values()), got
"""

PREP = (
    WRITE
    + """
from litdata_prep import optimize

def fn(i):
    return {"index": i, "tokens": np.full(4, i % 7, dtype=np.int32), "name": f"s{i}"}

if __name__ == "__main__":
    optimize(fn, list(range(100)), str(work / "ds"), chunk_size=16, num_workers=2, verbose=False)
    check_read(work / "ds")
    assert_no_torch()
"""
)

LITDATA = """
import subprocess, sys
from pathlib import Path

litdata = str(Path(sys.executable).with_name("litdata"))
out = subprocess.run([litdata, "quickstart", "--samples", "64"], capture_output=True, text=True)
assert out.returncode == 0 and "-> OK" in out.stdout, out.stdout + out.stderr
import litdata, viztracer, pyarrow, obstore, PIL  # everything: profiling, Parquet, object stores, images
assert litdata.StreamingDataLoader is not None and litdata.optimize is not None

# The docs' map with ParquetReader's defaults: fn gets a pandas DataFrame, as in upstream.
import pyarrow.parquet as pq
from litdata import map
from litdata.processing.readers import ParquetReader

work = Path(sys.argv[1])
pq.write_table(pyarrow.table({"x": list(range(10))}), work / "in.parquet")

def process(pq_file, output_dir):
    (Path(output_dir) / f"{int(pq_file['x'].iloc[0])}.txt").write_text(type(pq_file).__name__)

if __name__ == "__main__":
    map(fn=process, inputs=[str(work / "in.parquet")], output_dir=str(work / "out"), num_workers=1,
        reader=ParquetReader(cache_folder=str(work / "pq-shards"), num_rows=4))
    assert sorted(p.name for p in (work / "out").iterdir()) == ["0.txt", "4.txt", "8.txt"]
    assert (work / "out" / "0.txt").read_text() == "DataFrame"
"""

LITRACER = """
import json, subprocess, sys
from pathlib import Path

work = Path(sys.argv[1])
litracer = str(Path(sys.executable).with_name("litracer"))
subprocess.run([litracer, str(work / "trace.log"), "-o", str(work / "trace.json"), "--quiet"], check=True)
events = json.loads((work / "trace.json").read_text())["traceEvents"]
assert any(e.get("name") == "download" for e in events), events[:5]
"""

# What litracer converts: a real tracer log, written by litdata-io in the dev venv.
TRACE_PRODUCER = """
import sys
from litdata_io import enable_tracer, trace_span
enable_tracer("debug", log_file=sys.argv[1])
for chunk in range(3):
    with trace_span("download", chunk=chunk, size=100):
        pass
"""


@dataclass(frozen=True)
class Smoke:
    """One row of the matrix: what to install and what a user of it does."""

    package: str
    requirement: str
    script: str
    brings: tuple[str, ...] = ()
    lacks: tuple[str, ...] = ()
    needs_s3: bool = False
    needs_trace: bool = False


# ``brings`` and ``lacks``: what the README's install table says the package brings (or leaves out),
# as distribution names, checked in the fresh venv.
MATRIX = [
    Smoke("litdata-format", "litdata-format", FORMAT, ("numpy", "zstandard", "xxhash"), ("torch", "pillow", "pyarrow")),
    Smoke(
        "litdata-io", "litdata-io[s3]", IO, ("litdata-format", "obstore"), ("torch", "boto3", "fsspec"), needs_s3=True
    ),
    Smoke("litdata-stream", "litdata-stream", STREAM, ("litdata-io", "numpy", "torch"), ("viztracer", "pyarrow")),
    Smoke("litdata-raw", "litdata-raw", RAW, ("litdata-io", "torch", "zstandard"), ("obstore",)),
    Smoke("litdata-prep", "litdata-prep", PREP, ("litdata-io", "tqdm"), ("torch", "pyarrow", "pandas")),
    Smoke(
        "litdata",
        "litdata[extras]",
        LITDATA,
        ("litdata-stream", "litdata-raw", "litdata-prep", "pillow", "obstore", "pyarrow", "pandas", "viztracer"),
        ("ray",),
    ),
    Smoke("litracer", "litracer", LITRACER, (), ("litdata-format",), needs_trace=True),
]

# Run in the fresh venv after the install: our packages at the version just built, ``brings`` present, ``lacks`` not.
INSTALLED = """
import sys
from importlib.metadata import PackageNotFoundError, distributions, version

version_built, brings, lacks = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
ours = {"litdata", "litdata-format", "litdata-io", "litdata-stream", "litdata-raw", "litdata-prep", "litracer"}
names = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in distributions()}
wrong = {name: v for name, v in names.items() if name in ours and v != version_built}
assert not wrong, f"installed {wrong}, not the wheels built ({version_built}): another source won over the folder"
missing = [name for name in brings if name and name not in names]
assert not missing, f"the README says it brings {missing}, but the install did not"
extra = [name for name in lacks if name and name in names]
assert not extra, f"the README says it does not bring {extra}, but the install did"
"""


def _run(argv: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=cwd, env=env)
    if done.returncode != 0:
        raise SystemExit(f"install matrix: {what} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")


def build(where: Path) -> tuple[Path, Path]:
    """Build every wheel into ``where/dist``; write constraints pinning siblings to them, the rest to uv.lock."""
    dist = where / "dist"
    _run(["uv", "build", "--all-packages", "--wheel", "--out-dir", str(dist), "--quiet"], "uv build", cwd=ROOT)
    constraints = where / "constraints.txt"
    export = ["uv", "export", "--frozen", "--no-hashes", "--no-emit-workspace", "--all-extras", "--all-packages"]
    _run([*export, "--format", "requirements-txt", "--quiet", "-o", str(constraints)], "uv export", cwd=ROOT)
    return dist, constraints


@contextlib.contextmanager
def services(smokes: list[Smoke], work: Path) -> Iterator[dict[str, str]]:
    """The environment the smoke scripts need: a moto S3 server with a bucket, a tracer log."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["LITDATA_CACHE_DIR"] = str(work / "cache")
    if any(s.needs_trace for s in smokes):
        log = work / "litracer" / "trace.log"
        log.parent.mkdir(parents=True)
        _run([sys.executable, "-c", TRACE_PRODUCER, str(log)], "writing a tracer log")
    if not any(s.needs_s3 for s in smokes):
        yield env
        return
    with start_moto() as s3:
        options = s3.storage_options()
        env.update(
            S3_ENDPOINT=options["endpoint_url"],
            S3_KEY=options["aws_access_key_id"],
            S3_SECRET=options["aws_secret_access_key"],
            S3_REGION=options["region_name"],
            S3_BUCKET=s3.create_bucket(),
        )
        yield env


def check(smoke: Smoke, work: Path, dist: Path, constraints: Path, env: dict[str, str]) -> float:
    """Install ``smoke.package`` alone in a fresh venv and run its smoke script; return the seconds taken."""
    start = time.monotonic()
    folder = work / smoke.package
    folder.mkdir(exist_ok=True)
    venv = folder / ".venv"
    _run(["uv", "venv", "--quiet", "--python", sys.executable, str(venv)], f"{smoke.package}: uv venv")
    python = venv / "bin" / "python"
    install = ["uv", "pip", "install", "--quiet", "--python", str(python), "--find-links", str(dist)]
    _run([*install, "-c", str(constraints), smoke.requirement], f"{smoke.package}: installing {smoke.requirement}")
    built = next(dist.glob("litracer-*.whl")).name.split("-")[1]
    checks = [str(python), "-c", INSTALLED, built, ",".join(smoke.brings), ",".join(smoke.lacks)]
    _run(checks, f"{smoke.package}: what {smoke.requirement} installed")
    script = folder / "smoke.py"
    script.write_text(smoke.script)
    _run([str(python), str(script), str(folder)], f"{smoke.package}: the smoke test", env=env, cwd=folder)
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    names = [s.package for s in MATRIX]
    parser.add_argument("packages", nargs="*", metavar="PACKAGE", help=f"some of: {', '.join(names)} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.packages) - set(names)
    if unknown:
        parser.error(f"unknown package(s) {sorted(unknown)}; choose from {names}")
    smokes = [s for s in MATRIX if not args.packages or s.package in args.packages]
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="litdata-install-matrix-"))
    try:
        dist, constraints = build(work)
        with services(smokes, work) as env:
            for smoke in smokes:
                took = check(smoke, work, dist, constraints, env)
                print(f"install matrix: {smoke.requirement:<16} installed alone and used in {took:5.1f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"install matrix: {len(smokes)} packages OK in {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
