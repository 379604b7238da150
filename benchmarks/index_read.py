"""Opening an index.json: ours vs upstream 0.2.76, time and peak memory, in the same run (issue 51, 8).

Not a suite row. Three indexes, each opened in a fresh process per round by ours
(``litdata_format.load_index``) and by upstream (``ChunksConfig.load``, what its
``StreamingDataset`` does to read one):

- ``writer``: 1M chunks in the writers' layout (sorted keys, one shape: the scanned path);
- ``mixed``: 1M chunks in other tools' layouts (keys in varying orders, ``dim`` missing in a third);
- ``bigstr``: 10 chunks and a 200 MB string in a key nobody reads.

Time is the call alone (imports excluded); memory is the process's peak resident memory
(``VmHWM``) grown during the call. The report is each case's medians and the ours/upstream ratio.

    uv run python -m benchmarks.index_read --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.upstream_venv import upstream_python

ROOT = Path(__file__).resolve().parents[1]

CONFIG = {
    "chunk_bytes": None,
    "chunk_size": 10,
    "compression": None,
    "data_format": ["int"],
    "data_spec": '[1, {"type": null, "context": null, "children_spec": []}]',
    "encryption": None,
    "item_loader": "PyTreeLoader",
}

_MEASURE = """
import json, sys, time
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
if sys.argv[1] == "ours":
    from litdata_format import load_index
    def run(folder):
        return len(load_index(folder).chunks)
else:
    from litdata.streaming.config import ChunksConfig
    from litdata.streaming.serializers import _SERIALIZERS
    def run(folder):
        return len(ChunksConfig.load(folder, serializers=_SERIALIZERS, remote_dir=None).intervals)
before, started = peak(), time.perf_counter()
count = run(sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - started, "grown": peak() - before, "chunks": count}))
"""


def _entry(i: int) -> dict[str, object]:
    return {"chunk_bytes": 1000 + i, "chunk_size": 10, "dim": None, "filename": f"chunk-0-{i}.bin"}


def make_indexes(folder: Path, chunks: int) -> dict[str, Path]:
    """The three cases' folders, each with its index.json."""
    found: dict[str, Path] = {}
    for case in ("writer", "mixed", "bigstr"):
        where = folder / case
        where.mkdir()
        if case == "writer":
            obj = {"chunks": [_entry(i) for i in range(chunks)], "config": CONFIG, "updated_at": "1"}
        elif case == "mixed":
            entries = []
            for i in range(chunks):
                entry = _entry(i)
                if i % 3 == 0:
                    del entry["dim"]
                entries.append(dict(reversed(list(entry.items()))) if i % 2 else entry)
            obj = {"chunks": entries, "config": CONFIG, "updated_at": "1"}
        else:
            obj = {"chunks": [_entry(i) for i in range(10)], "config": CONFIG, "notes": "x" * 200_000_000}
        (where / "index.json").write_text(json.dumps(obj, sort_keys=case != "mixed"))
        found[case] = where
    return found


def measure(python: str, lib: str, folder: Path) -> dict[str, float]:
    done = subprocess.run(
        [python, "-c", _MEASURE, lib, str(folder)], capture_output=True, text=True, check=True, timeout=900
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=1_000_000)
    args = parser.parse_args()
    pythons = {"ours": sys.executable, "upstream": str(upstream_python())}
    with tempfile.TemporaryDirectory(prefix="index-read-") as scratch:
        cases = make_indexes(Path(scratch), args.chunks)
        print("| index | ours s | upstream s | time ratio | ours peak MB | upstream peak MB | memory ratio |")
        print("|---|---|---|---|---|---|---|")
        for case, folder in cases.items():
            runs: dict[str, list[dict[str, float]]] = {lib: [] for lib in pythons}
            for _ in range(args.rounds):  # alternated, so the machine's load falls on both alike
                for lib, python in pythons.items():
                    runs[lib].append(measure(python, lib, folder))
            med = {
                lib: {k: statistics.median(r[k] for r in found) for k in ("seconds", "grown")}
                for lib, found in runs.items()
            }
            ours, theirs = med["ours"], med["upstream"]
            time_ratio = ours["seconds"] / theirs["seconds"]
            memory_ratio = ours["grown"] / max(theirs["grown"], 1)
            print(
                f"| {case} | {ours['seconds']:.2f} | {theirs['seconds']:.2f} | {time_ratio:.2f} "
                f"| {ours['grown'] / 1e6:.0f} | {theirs['grown'] / 1e6:.0f} | {memory_ratio:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
