"""Who processes what (static slices, node shares, balancing) and which node this is."""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path

import pytest

import litdata_prep
from litdata_prep._inputs import (
    Numbered,
    batched,
    contiguous_bins,
    limit_for_dev_run,
    node_share,
    worker_slices,
)
from litdata_prep._nodes import NodeInfo, check_node_request, detect_nodes


def test_contiguous_bins_put_the_remainder_last() -> None:
    assert [list(r) for r in contiguous_bins(5, 2)] == [[0, 1], [2, 3, 4]]
    assert [len(r) for r in contiguous_bins(10, 4)] == [2, 2, 3, 3]
    assert [len(r) for r in contiguous_bins(2, 4)] == [0, 0, 1, 1]


def test_aligned_bins_hold_whole_chunks() -> None:
    assert [len(r) for r in contiguous_bins(23, 3, align=4)] == [4, 4, 15]
    assert [len(r) for r in contiguous_bins(40, 2, align=5)] == [20, 20]
    with pytest.warns(UserWarning, match="too large"):
        assert [len(r) for r in contiguous_bins(7, 2, align=5)] == [0, 7]


def test_weighted_bins_are_contiguous_shares_of_the_weight() -> None:
    weights = [4, 1, 2, 5, 8, 7, 3, 6, 9]
    bins = contiguous_bins(len(weights), 3, weights=weights)
    assert [list(b) for b in bins] == [[0, 1, 2, 3], [4, 5, 6], [7, 8]]  # loads 12, 18, 15: cuts nearest 15 and 30
    assert [len(b) for b in contiguous_bins(3, 4, weights=[1, 1, 1])] == [1, 1, 0, 1]
    assert [len(b) for b in contiguous_bins(4, 2, weights=[100, 1, 1, 1])] == [1, 3]


def test_worker_slices_cover_every_input_once_across_nodes() -> None:
    items = list(range(23))
    seen = []
    for node in range(2):
        for part in worker_slices(items, 3, num_nodes=2, node_rank=node):
            seen += [pos for pos, _ in part]
    assert seen == items
    shares = [pos for node in range(3) for pos, _ in node_share(items, num_nodes=3, node_rank=node)]
    assert shares == items


def test_numbered_inputs_are_pairs_kept_as_two_sequences() -> None:
    items = [f"file-{i}.jpg" for i in range(10_000)]
    first, second = worker_slices(items, 2)
    assert first.positions == range(5_000) and list(second[:2]) == [(5_000, "file-5000.jpg"), (5_001, "file-5001.jpg")]
    assert second[-1] == (9_999, "file-9999.jpg") and len(second[10:20]) == 10
    assert list(second[10:20]) == list(zip(range(5_010, 5_020), items[5_010:5_020]))
    # Contiguous positions travel as a range: the pickle is about the inputs' size, not the pairs'.
    share = node_share(items)
    copy = pickle.loads(pickle.dumps(share[100:612]))
    assert isinstance(copy, Numbered) and list(copy) == list(zip(range(100, 612), items[100:612]))
    assert len(pickle.dumps(share)) < len(pickle.dumps(items)) + 200
    weighted = worker_slices(items[:6], 2, weights=[1, 5, 1, 1, 1, 1])
    assert [[pos for pos, _ in w] for w in weighted] == [[0, 1], [2, 3, 4, 5]]  # contiguous, about equal weight
    with pytest.raises(ValueError, match="3 positions for 2 inputs"):
        Numbered(range(3), ["a", "b"])


def test_batched_and_fast_dev_run() -> None:
    assert batched(range(5), 2) == [[0, 1], [2, 3], [4]]
    assert batched(range(3), None) == [0, 1, 2]
    assert limit_for_dev_run(True) == 10
    assert limit_for_dev_run(False) is None
    assert limit_for_dev_run(3) == 3
    with pytest.raises(ValueError, match="fast_dev_run"):
        limit_for_dev_run(-1)


def test_node_environments() -> None:
    assert detect_nodes({}) == NodeInfo(1, 0, "single")
    info = detect_nodes({"DATA_OPTIMIZER_NUM_NODES": "4", "DATA_OPTIMIZER_NODE_RANK": "3"})
    assert (info.num_nodes, info.node_rank, info.is_last) == (4, 3, True)
    torchrun = detect_nodes({"GROUP_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"})
    assert (torchrun.num_nodes, torchrun.node_rank, torchrun.source) == (2, 1, "torchrun")
    slurm = detect_nodes({"SLURM_NNODES": "3", "SLURM_NODEID": "0", "SLURM_NTASKS": "3"})
    assert (slurm.num_nodes, slurm.node_rank, slurm.source) == (3, 0, "SLURM")
    with pytest.raises(ValueError, match="nproc-per-node=1"):
        detect_nodes({"GROUP_RANK": "0", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"})
    with pytest.raises(ValueError, match="outside"):
        detect_nodes({"DATA_OPTIMIZER_NUM_NODES": "2", "DATA_OPTIMIZER_NODE_RANK": "2"})
    with pytest.raises(ValueError, match="must be an integer"):
        detect_nodes({"DATA_OPTIMIZER_NUM_NODES": "two"})


def test_num_nodes_without_a_multi_node_launch_explains_how() -> None:
    check_node_request(None, None, NodeInfo())
    with pytest.raises(ValueError, match="DATA_OPTIMIZER_NUM_NODES"):
        check_node_request(2, None, NodeInfo())
    with pytest.raises(ValueError, match="machine="):
        check_node_request(None, "A10G", NodeInfo())
    with pytest.raises(ValueError, match="says this job runs on 2 nodes"):
        check_node_request(3, None, NodeInfo(2, 0, "torchrun"))
    check_node_request(2, None, NodeInfo(2, 1, "torchrun"))


def test_the_merge_names_the_nodes_whose_share_never_arrived(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    square = importlib.import_module("prep_fns").square
    # This process is the last of three nodes; nodes 0 and 1 never run.
    monkeypatch.setenv("DATA_OPTIMIZER_NUM_NODES", "3")
    monkeypatch.setenv("DATA_OPTIMIZER_NODE_RANK", "2")
    monkeypatch.setenv("LITDATA_NODE_MERGE_TIMEOUT", "0.5")
    with pytest.raises(TimeoutError, match=r"for nodes \[0, 1\] to publish their part of the index"):
        litdata_prep.optimize(
            square,
            list(range(30)),
            str(tmp_path / "out"),
            chunk_size=4,
            num_workers=1,
            start_method="fork",
            verbose=False,
        )
