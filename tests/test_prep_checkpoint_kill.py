"""Kill -9 a running optimize(use_checkpoint=True) at a random point, run it again: the same dataset.

The job runs as a script in its own process group (parent and workers), as a user would run it;
SIGKILL to the whole group leaves whatever was on disk at that instant.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from litdata_stream import StreamingDataset

pytestmark = pytest.mark.slow

SCRIPT = """
import sys, time
from litdata_prep import optimize

def fn(i):
    time.sleep(0.004)
    # 0 to 3 samples per input, so a chunk boundary can fall inside one input's samples
    for k in range(i % 4):
        yield {"i": i, "k": k, "payload": bytes([i % 251]) * (50 + i % 13)}

if __name__ == "__main__":
    optimize(fn, list(range(int(sys.argv[2]))), sys.argv[1], chunk_size=7, num_workers=2, use_checkpoint=True,
             verbose=False)
"""


def _run(script: Path, out: Path, n: int, kill_after: float | None = None) -> int:
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(n)], start_new_session=True)
    if kill_after is None:
        return proc.wait(timeout=120)
    deadline = time.monotonic() + 60
    while not any(out.glob("chunk-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(kill_after)
    os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait(timeout=30)


def _samples(path: Path) -> list[tuple[int, int, bytes]]:
    return [(s["i"], s["k"], s["payload"]) for s in StreamingDataset(str(path))]


KEYED = SCRIPT.replace("use_checkpoint=True,", "use_checkpoint=True, key_fn=key,").replace(
    'if __name__ == "__main__":',
    "def key(sample):\n    return f\"{sample['i']}-{sample['k']}\"\n\nif __name__ == \"__main__\":",
)


def _key_index(path: Path) -> dict[str, list[object]]:
    import pyarrow.parquet as pq

    return pq.read_table(path / "keys" / "shard-00000.parquet").to_pydict()


# chunk_bytes cuts chunks by the bytes of the samples (Arrow rows here: by the bytes per row of the
# previous chunk), so a resumed writer must carry that over to cut where an uninterrupted one does.
BY_BYTES = SCRIPT.replace("chunk_size=7,", "chunk_bytes=1200,")


@pytest.mark.parametrize(
    ("keyed", "by_bytes"), [(False, False), (True, False), (False, True)], ids=["plain", "key_fn", "chunk_bytes"]
)
def test_killed_optimize_resumes_to_the_same_samples(tmp_path: Path, keyed: bool, by_bytes: bool) -> None:
    script = tmp_path / "job.py"
    script.write_text(KEYED if keyed else BY_BYTES if by_bytes else SCRIPT)
    n = 400
    assert _run(script, tmp_path / "reference", n) == 0
    reference = _samples(tmp_path / "reference")
    assert len(reference) == sum(i % 4 for i in range(n))

    rng = random.Random()
    out = tmp_path / "resumed"
    killed = 0
    for attempt in range(2):
        code = _run(script, out, n, kill_after=rng.uniform(0.0, 0.4))
        if code == -signal.SIGKILL:
            killed += 1
            if (out / "index.json").exists():  # killed after publishing it (a resumed job can be that quick)
                assert _samples(out) == reference, f"attempt {attempt}: index.json of an unfinished dataset"
    assert killed >= 1
    assert _run(script, out, n) == 0
    assert _samples(out) == reference
    # The same files as the uninterrupted run's, nothing more: no checkpoint, staging or temporary file left.
    assert _files(out) == _files(tmp_path / "reference")
    # Byte for byte: every chunk, and index.json but for its "updated_at" (the time it was written).
    for name in _files(out):
        if name.startswith("chunk-"):
            assert (out / name).read_bytes() == (tmp_path / "reference" / name).read_bytes(), name
    assert _index(out) == _index(tmp_path / "reference")
    if keyed:  # keys, positions, chunk numbers: as if never killed (the kept chunk keys went with the checkpoints)
        assert _key_index(out) == _key_index(tmp_path / "reference")
        assert StreamingDataset(str(out))["58-1"] == {"i": 58, "k": 1, "payload": bytes([58]) * (50 + 58 % 13)}


def _index(root: Path) -> dict[str, object]:
    index = json.loads((root / "index.json").read_text())
    del index["updated_at"]
    return index


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


KILLED_AFTER_PUBLISHING = SCRIPT.replace(
    'if __name__ == "__main__":',
    # The job kills itself at the instant between publishing index.json and removing its checkpoints.
    "import os, signal\n"
    "import litdata_prep._optimize as _optimize\n"
    "_optimize.clear_checkpoints = lambda *args: os.kill(os.getpid(), signal.SIGKILL) if len(sys.argv) > 3 else None\n"
    'if __name__ == "__main__":',
)


def test_a_job_killed_after_publishing_its_index_only_cleans_up_when_run_again(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    assert _run(script, tmp_path / "reference", 120) == 0
    killing = tmp_path / "killing.py"
    killing.write_text(KILLED_AFTER_PUBLISHING)
    out = tmp_path / "out"
    code = subprocess.run([sys.executable, str(killing), str(out), "120", "kill"], check=False, timeout=120).returncode
    assert code == -signal.SIGKILL
    assert (out / "index.json").exists() and list(out.glob(".checkpoints/*"))  # published, not cleaned up
    assert _run(script, out, 120) == 0  # the same job again: nothing to redo, only the leftovers go
    assert _samples(out) == _samples(tmp_path / "reference")
    assert not list(out.glob(".checkpoints/*")) and not list(out.glob(".litdata-staging-*"))
    command = [sys.executable, str(script), str(out), "100"]
    other = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    assert other.returncode != 0 and "already holds an optimized dataset" in other.stderr  # another job is refused
