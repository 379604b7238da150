"""The rank and world size from environment variables alone, in real processes (no torch.distributed).

Each case starts a fresh interpreter with only the variables a launcher would leave (every
rank-related variable of this test's own environment removed first), which makes a 20-sample
dataset of 2-sample chunks and reports what it reads.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from litdata_format import BinaryWriter
from litdata_stream import StreamingDataLoader, StreamingDataset
from litdata_stream._env import DistributedEnv

_SCRIPT = """
import json, sys
from litdata_stream import StreamingDataLoader, StreamingDataset
dataset = StreamingDataset(sys.argv[1], shuffle=False)
direct = [int(s) for s in dataset]
loader = [int(i) for batch in StreamingDataLoader(StreamingDataset(sys.argv[1]), batch_size=1) for i in batch]
print(json.dumps({"world": dataset.distributed_env.world_size, "direct": direct, "loader": loader}))
"""

_RANK_VARS = (
    "WORLD_SIZE", "RANK", "GLOBAL_RANK", "NNODES", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
)  # fmt: skip
FIRST, SECOND = list(range(10)), list(range(10, 20))

# (launcher variables, what the process must read): ways of saying "rank 1 of 2" that the old
# detection (RANK / SLURM_PROCID only) got wrong or that a rule comparing SLURM with torchrun would break.
CASES = {
    "upstream GLOBAL_RANK": ({"WORLD_SIZE": "2", "GLOBAL_RANK": "1", "NNODES": "1"}, SECOND),
    "torchrun inside srun": (
        {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
        | {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"},  # srun's one task on this node: not the rank
        SECOND,
    ),
    "Lightning's own launcher": ({"WORLD_SIZE": "2", "LOCAL_RANK": "1", "NODE_RANK": "0"}, SECOND),
}


def _make(path: Path) -> Path:
    writer = BinaryWriter(path, chunk_size=2)
    for i in range(20):
        writer.add_item(i, i)
    writer.done()
    writer.merge()
    return path


def _env(variables: dict[str, str]) -> dict[str, str]:
    # A test run inside a SLURM job or under torchrun must not leak its own rank into the children.
    env = {k: v for k, v in os.environ.items() if k not in _RANK_VARS and not k.startswith("SLURM_")}
    return env | variables


def _start(path: Path, variables: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(path)],
        env=_env(variables),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory.mktemp("ranks") / "data")


def test_every_launcher_s_variables_give_the_rank_its_own_part(dataset: Path) -> None:
    # The processes run side by side: each pays for importing torch once.
    running = {name: _start(dataset, variables) for name, (variables, _) in CASES.items()}
    for name, proc in running.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {err}"
        got = json.loads(out.strip().splitlines()[-1])
        expected = CASES[name][1]
        assert got["direct"] == expected, name
        assert got["loader"] == expected, name


def test_rank_0_reads_the_other_half(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _RANK_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("GLOBAL_RANK", "0")
    monkeypatch.setenv("NNODES", "1")
    assert [int(s) for s in StreamingDataset(dataset, shuffle=False)] == FIRST


def test_a_dataset_made_before_the_world_existed_splits_its_epoch_over_it(
    dataset: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Lightning's launcher sets the world up inside Trainer.fit, after the script made its loader.
    for name in _RANK_VARS:
        monkeypatch.delenv(name, raising=False)
    made = StreamingDataset(dataset, shuffle=False)
    loader = StreamingDataLoader(made, batch_size=2)
    assert len(loader) == 10 and not made.drop_last
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with caplog.at_level(logging.INFO, logger="litdata.streaming.dataset"):
        assert len(loader) == 5
    assert made.distributed_env == DistributedEnv(2, 1) and made.drop_last  # drop_last's default follows
    assert "made in a world of 1 process(es) and is now read by rank 1 of 2" in caplog.text
    assert [int(i) for batch in loader for i in batch] == SECOND
    alone = StreamingDataset(dataset, shuffle=False, drop_last=False)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert [int(s) for s in alone] == FIRST and not alone.drop_last  # a drop_last given stays


def test_a_process_whose_variables_disagree_refuses_to_read(dataset: Path) -> None:
    proc = _start(dataset, {"WORLD_SIZE": "2", "RANK": "0", "GLOBAL_RANK": "1"})
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0 and not out
    assert "ValueError: RANK=0 and GLOBAL_RANK=1 disagree" in err


def test_the_precedence_in_one_place() -> None:
    # The same rules without a process per case: what each launcher leaves and what it means.
    place = DistributedEnv.from_environ
    assert place({}) == DistributedEnv(1, 0)
    # torchrun in srun, two nodes of 4: SLURM counts the nodes, torchrun the processes; both are right.
    torchrun = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}
    assert place(torchrun) == DistributedEnv(8, 5)
    assert place({"WORLD_SIZE": "4", "SLURM_PROCID": "2", "SLURM_NTASKS": "4"}) == DistributedEnv(4, 2)
    assert place({"WORLD_SIZE": "4", "RANK": "3", "NNODES": "2"}) == DistributedEnv(4, 3, 2)
    assert place({"WORLD_SIZE": "4", "LOCAL_RANK": "1", "NODE_RANK": "1", "LOCAL_WORLD_SIZE": "2"}).global_rank == 3
    # SLURM's task id does not count when a launcher names the world (LOCAL_RANK alone does not).
    assert place({"LOCAL_RANK": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}) == DistributedEnv(2, 1)
    assert place({"WORLD_SIZE": "2", "GLOBAL_RANK": "0", "NNODES": "1"}) == DistributedEnv(2, 0)
    assert place({"WORLD_SIZE": "2", "RANK": "1", "GLOBAL_RANK": "1"}) == DistributedEnv(2, 1)
    assert place({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}) == DistributedEnv(2, 1)
    errors = {
        "NODE_RANK=1 and GROUP_RANK=0 disagree": {"WORLD_SIZE": "4", "LOCAL_RANK": "1", "NODE_RANK": "1"}
        | {"GROUP_RANK": "0"},
        "the processes per node are unknown": {"WORLD_SIZE": "4", "LOCAL_RANK": "1", "NODE_RANK": "1"},
        r"rank 2 \(from RANK\) is outside a world of 1": {"RANK": "2"},
        "NNODES=3 does not fit a world of 2": {"WORLD_SIZE": "2", "RANK": "1", "NNODES": "3"},
        "WORLD_SIZE=2 says this is one of 2 processes but no variable says which": {"WORLD_SIZE": "2"},
        "WORLD_SIZE='x' is not an integer": {"WORLD_SIZE": "x"},
        "WORLD_SIZE=0: the number of processes must be at least 1": {"WORLD_SIZE": "0"},
    }  # fmt: skip
    for message, variables in errors.items():
        with pytest.raises(ValueError, match=message):
            place(variables)
