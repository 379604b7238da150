"""optimize over millions of inputs: the parent never holds them, and every sample is written once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from litdata_format import DatasetReader
from litdata_prep._checks import prepare_map

HERE = Path(__file__).resolve().parent

# The driver runs in a fresh interpreter, so its peak RSS is the job's alone. It builds the
# generator, measures the peak before and after optimize, and prints both (kB, Linux).
_DRIVER = """
import json, resource, sys
from litdata_prep import optimize
import prep_fns

def inputs(n):
    for i in range(n):
        yield i

if __name__ == "__main__":
    n, out = int(sys.argv[1]), sys.argv[2]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    optimize(prep_fns.every_thousandth, inputs(n), out, chunk_size=500, num_workers=2, verbose=False)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kb": before, "after_kb": after}))
"""

N = 2_000_000


def test_a_generator_of_two_million_inputs_is_streamed_not_held(tmp_path: Path) -> None:
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, str(script), str(N), str(out)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr
    rss = json.loads(done.stdout.strip().splitlines()[-1])
    # 2M ints in a list are ~72 MB (16 MB of pointers, 28 B per int): the parent must stay far below.
    growth_mb = (rss["after_kb"] - rss["before_kb"]) / 1024
    assert growth_mb < 25, f"the parent grew by {growth_mb:.0f} MB running a generator of {N} inputs"
    reader = DatasetReader(out)
    values = sorted(reader[i] for i in range(len(reader)))
    assert values == list(range(0, N, 1000))  # every kept input exactly once, none lost, none doubled


def test_a_range_is_neither_copied_nor_split_into_copies(tmp_path: Path) -> None:
    inputs = range(10_000_000)
    request = {
        "fn": print,
        "inputs": inputs,
        "output_dir": str(tmp_path / "out"),
        "input_dir": None,
        "weights": None,
        "num_workers": 2,
        "fast_dev_run": False,
        "num_nodes": None,
        "machine": None,
        "num_downloaders": None,
        "num_uploaders": None,
        "reorder_files": True,
        "reader": None,
        "batch_size": None,
        "start_method": "fork",
        "optimize_dns": None,
        "storage_options": None,
        "keep_data_ordered": None,
        "broadcast_paths": False,
        "verbose": False,
        "executor": None,
        "error_when_not_empty": False,
    }
    job = prepare_map(request)
    assert job.items is inputs
    shared = job.shared_inputs()
    assert isinstance(shared.values, range)  # pyright: ignore[reportAttributeAccessIssue]
    slices = prepare_map({**request, "keep_data_ordered": True}).ordered_slices()
    assert [type(s.values) for s in slices] == [range, range]
    assert sum(len(s) for s in slices) == len(inputs)
