"""``optimize(inputs=StreamingDataset(...))`` and ``inputs=StreamingDataLoader(...)``: an optimized
dataset re-optimized (re-chunked, re-compressed, filtered in ``fn``) by several workers, and a run
killed with SIGKILL finishing with ``use_checkpoint`` to the same dataset."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from litdata_format import BinaryWriter
from litdata_prep import map, optimize
from litdata_stream import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from tests.support.zygote import start_python

pytestmark = pytest.mark.slow

# Spawned workers import the functions from a script of their own (as a user's job would).
FNS = """
import time

def keep_odd(sample):
    if sample["id"] % 2:
        return {"id": sample["id"] * 10, "text": sample["text"]}
    return None

def rows(batch):
    for i, text in zip(batch["id"].tolist(), batch["text"]):
        yield {"id": i, "text": text.upper()}

def slow_copy(sample):
    time.sleep(0.004)
    return sample

def touch(sample, output_dir):
    open(f"{output_dir}/{int(sample['id'])}.txt", "w").write(sample["text"])
"""


def _source(path: Path, n: int = 200) -> str:
    writer = BinaryWriter(path, chunk_size=9)
    for i in range(n):
        writer.add_item(i, {"id": i, "text": f"sample {i} " + "x" * (i % 17)})
    writer.done()
    writer.merge()
    return str(path)


@pytest.fixture
def fns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "stream_fns.py").write_text(FNS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    import stream_fns  # pyright: ignore[reportMissingImports]

    return stream_fns


def _read(path: Path) -> list[dict[str, Any]]:
    return [{"id": int(s["id"]), "text": s["text"]} for s in StreamingDataset(str(path))]


def test_a_dataset_is_re_optimized_filtered_rechunked_and_recompressed(tmp_path: Path, fns: Any) -> None:
    source = _source(tmp_path / "source")
    out = tmp_path / "out"
    optimize(fns.keep_odd, StreamingDataset(source), str(out), chunk_size=25, compression="zstd", num_workers=2,
             keep_data_ordered=True, verbose=False)  # fmt: skip
    expected = [{"id": i * 10, "text": f"sample {i} " + "x" * (i % 17)} for i in range(1, 200, 2)]
    assert _read(out) == expected
    index = json.loads((out / "index.json").read_text())
    # Dicts of JSON-like values are Arrow rows (as upstream 0.2.76 writes them): zstd compresses their buffers.
    assert index["config"]["ipc_compression"] == "zstd"
    assert [c["chunk_size"] for c in index["chunks"]] == [25, 25, 25, 25]


def test_a_loader_gives_fn_its_batches(tmp_path: Path, fns: Any) -> None:
    source = _source(tmp_path / "source", 50)
    out = tmp_path / "out"
    loader = StreamingDataLoader(StreamingDataset(source), batch_size=8)
    optimize(fns.rows, loader, str(out), chunk_bytes="1MB", num_workers=2, keep_data_ordered=True, verbose=False)
    assert _read(out) == [{"id": i, "text": (f"sample {i} " + "x" * (i % 17)).upper()} for i in range(50)]
    # drop_last leaves the last partial batch (50 = 6 * 8 + 2) out, as the loader would.
    dropped = tmp_path / "dropped"
    loader = StreamingDataLoader(StreamingDataset(source), batch_size=8, drop_last=True)
    optimize(fns.rows, loader, str(dropped), chunk_size=10, num_workers=2, verbose=False)
    assert sorted(s["id"] for s in _read(dropped)) == list(range(48))


def test_map_takes_a_dataset_too(tmp_path: Path, fns: Any) -> None:
    source = _source(tmp_path / "source", 30)
    out = tmp_path / "files"
    map(fns.touch, StreamingDataset(source), str(out), num_workers=2)
    assert sorted(int(p.stem) for p in out.glob("*.txt")) == list(range(30))


def test_what_cannot_be_used_is_refused(tmp_path: Path, fns: Any) -> None:
    source = _source(tmp_path / "source", 20)
    mixed = CombinedStreamingDataset([StreamingDataset(source), StreamingDataset(source)])
    with pytest.raises(ValueError, match="inputs=CombinedStreamingDataset is not supported"):
        optimize(fns.keep_odd, mixed, str(tmp_path / "a"), chunk_size=5)
    loader = StreamingDataLoader(StreamingDataset(source), batch_size=4)
    with pytest.raises(ValueError, match="batch_size cannot be combined with inputs=StreamingDataLoader"):
        optimize(fns.rows, loader, str(tmp_path / "b"), chunk_size=5, batch_size=2)


JOB = """
import sys
from litdata_prep import optimize
from litdata_stream import StreamingDataset
from stream_fns import slow_copy

if __name__ == "__main__":
    optimize(slow_copy, StreamingDataset(sys.argv[1]), sys.argv[2], chunk_size=7, num_workers=2, use_checkpoint=True,
             verbose=False)
"""


def _run(script: Path, source: str, out: Path, kill: bool) -> int:
    """``python job.py`` (its import lines load torch: forked from the test zygote, tests/support/zygote.py)."""
    env = {**os.environ, "PYTHONPATH": str(script.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = start_python([str(script), source, str(out)], env=env, cwd=Path.cwd(), start_new_session=True)
    if kill:
        while not len(list(out.glob("chunk-*"))) >= 4 and proc.poll() is None:
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=30 if kill else 120)
    print(stdout + stderr, end="")  # the job's output, which pytest shows with a failure
    assert proc.returncode is not None
    return proc.returncode


def test_a_killed_re_optimization_resumes_to_the_same_dataset(tmp_path: Path, fns: Any) -> None:
    source = _source(tmp_path / "source", 400)
    script = tmp_path / "job.py"
    script.write_text(JOB)
    assert _run(script, source, tmp_path / "reference", kill=False) == 0
    out = tmp_path / "resumed"
    assert _run(script, source, out, kill=True) == -signal.SIGKILL
    assert not (out / "index.json").exists()  # killed halfway: 400 samples take ~1 s per worker
    assert list(out.glob(".checkpoints/*"))
    assert _run(script, source, out, kill=False) == 0
    assert _read(out) == _read(tmp_path / "reference") == _read(Path(source))
