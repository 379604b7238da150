"""optimize(key_fn=...) and looking samples up by key, both ways with upstream litdata 0.2.76."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from litdata_prep import WorkerError, optimize
from litdata_stream import StreamingDataset
from tests.support import prep_e2e_fns as fns
from tests.support.upstream_venv import run_upstream

pytestmark = [pytest.mark.compat, pytest.mark.slow]
FORK: dict[str, Any] = {"start_method": "fork", "verbose": False}

UPSTREAM_LOOKS_UP = """
import json, pickle, sys
from litdata import StreamingDataset
ds = StreamingDataset(sys.argv[2])
out = [ds[k] if isinstance(k, str) else ds.get_by_key(k) for k in json.loads(sys.argv[3])]
with open(sys.argv[1], "wb") as f:
    pickle.dump(out, f)
"""

UPSTREAM_WRITES = """
import pickle, sys
from litdata import optimize

def fn(i):
    return {"name": f"item-{i}", "value": i * 3}

def key(sample):
    return sample["name"]

if __name__ == "__main__":
    optimize(fn=fn, inputs=list(range(23)), output_dir=sys.argv[2], chunk_size=5, num_workers=2, key_fn=key,
             start_method="fork")
    with open(sys.argv[1], "wb") as f:
        pickle.dump(None, f)
"""


def test_upstream_finds_our_samples_by_key(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    optimize(fns.named, list(range(40)), out, chunk_size=6, num_workers=2, key_fn=fns.name_key, **FORK)
    ours = StreamingDataset(str(out))
    wanted = ["item-0", "item-39", "item-17", "item-6"]
    expected = [{"name": k, "value": int(k.split("-")[1]) * 3} for k in wanted]
    assert [ours[k] for k in wanted] == expected
    assert run_upstream(UPSTREAM_LOOKS_UP, str(out), json.dumps(wanted)) == expected


def test_int_keys_and_append_keep_one_index(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    optimize(fns.named, list(range(10)), out, chunk_size=4, num_workers=2, key_fn=fns.value_key, **FORK)
    optimize(fns.named, list(range(10, 15)), out, chunk_size=4, num_workers=1, key_fn=fns.value_key, mode="append",
             **FORK)  # fmt: skip
    ours = StreamingDataset(str(out))
    assert [ours.get_by_key(v)["name"] for v in (0, 27, 30, 42)] == ["item-0", "item-9", "item-10", "item-14"]
    assert ours[3] == StreamingDataset(str(out))[3]  # an int index is still a position
    got = run_upstream(UPSTREAM_LOOKS_UP, str(out), json.dumps([0, 27, 30, 42]))
    assert [s["name"] for s in got] == ["item-0", "item-9", "item-10", "item-14"]


def test_we_find_upstreams_samples_by_key(tmp_path: Path) -> None:
    out = tmp_path / "theirs"
    run_upstream(UPSTREAM_WRITES, str(out))
    assert (out / "keys" / "shard-00000.parquet").is_file()
    ds = StreamingDataset(str(out))
    for i in (0, 22, 11, 5):
        assert ds[f"item-{i}"] == {"name": f"item-{i}", "value": i * 3}
    with pytest.raises(KeyError, match="item-23"):
        ds["item-23"]


def test_duplicate_keys_stop_the_job_and_leave_no_dataset(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with pytest.raises(ValueError, match="key_fn returned the key 'always' for samples"):
        optimize(fns.named, list(range(6)), out, chunk_size=4, num_workers=1, key_fn=fns.same_key, **FORK)
    assert not (out / "index.json").exists() and not list(out.glob("chunk-*")) and not (out / "keys").exists()


def test_a_bad_key_names_the_input(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"refused for input 0 .*key_fn returned a dict"):
        optimize(fns.named, list(range(3)), tmp_path / "ds", chunk_size=4, num_workers=1, key_fn=fns.identity_key,
                 **FORK)  # fmt: skip


def test_key_fn_with_use_checkpoint_resumes_to_the_same_key_index(tmp_path: Path, monkeypatch: Any) -> None:
    opts: dict[str, Any] = {"chunk_size": 4, "num_workers": 2, "key_fn": fns.name_key, "use_checkpoint": True, **FORK}
    optimize(fns.named, list(range(40)), tmp_path / "clean", **opts)
    monkeypatch.setenv("LITDATA_TEST_FAIL_ONCE", str(tmp_path / "failed-once"))
    out = tmp_path / "resumed"
    with pytest.raises(WorkerError, match="input 29"):
        optimize(fns.named_failing_once, list(range(40)), out, **opts)
    assert list(out.glob(".checkpoints/keys-chunk-*.json"))  # the published chunks' keys are kept
    optimize(fns.named_failing_once, list(range(40)), out, **opts)
    assert _key_rows(out) == _key_rows(tmp_path / "clean")
    assert not (out / ".checkpoints").exists()
    assert StreamingDataset(str(out))["item-31"] == {"name": "item-31", "value": 93}

    # Checkpoints of a run without key_fn cannot give the keys of what it wrote: said, not guessed.
    other = tmp_path / "unkeyed"
    (tmp_path / "failed-once").unlink()
    with pytest.raises(WorkerError):
        optimize(fns.named_failing_once, list(range(40)), other, **{**opts, "key_fn": None})
    with pytest.raises(WorkerError, match="did it run without key_fn"):
        optimize(fns.named, list(range(40)), other, **opts)


def _key_rows(path: Path) -> dict[str, list[Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path / "keys" / "shard-00000.parquet").to_pydict()


LOOKS_UP_AND_EXITS = """
import sys
import litdata as ld

ds = ld.StreamingDataset(sys.argv[1])
assert ds["item-7"]["value"] == 21
# What aborted the interpreter's exit (with torch loaded) came with pyarrow's dataset reader.
assert "pyarrow.dataset" not in sys.modules and "pyarrow._acero" not in sys.modules, sorted(sys.modules)
"""


def test_a_key_lookup_exits_cleanly_every_time(tmp_path: Path) -> None:
    """``ds["key"]`` in 20 fresh interpreters (torch and pyarrow loaded): every one exits with code 0."""
    import os
    import subprocess
    import sys

    out = tmp_path / "keyed"
    optimize(fn=fns.named, inputs=list(range(23)), output_dir=str(out), chunk_size=5, num_workers=1,
             key_fn=fns.name_key, **FORK)  # fmt: skip
    script = tmp_path / "lookup.py"
    script.write_text(LOOKS_UP_AND_EXITS)
    codes: list[int] = []
    for _ in range(5):  # 4 at a time: 20 interpreters without starving the 2 cores
        procs = [
            subprocess.Popen([sys.executable, str(script), str(out)], stderr=subprocess.PIPE, env=dict(os.environ))
            for _ in range(4)
        ]
        errors = [proc.communicate(timeout=300)[1].decode(errors="replace") for proc in procs]
        codes.extend(proc.returncode for proc in procs)
        assert codes == [0] * len(codes), "\n".join(e[-2000:] for e in errors)
    assert codes == [0] * 20
