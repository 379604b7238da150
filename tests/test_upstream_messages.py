"""The words upstream LitData 0.2.76 puts in its errors and log records, kept inside ours.

Code written for upstream matches some of them (``pytest.raises(..., match=...)``, log filters,
``except`` clauses), so each of our messages opens with, or contains, upstream's sentence and
goes on with ours (which names the thing and what to do). Exception types are checked against
the real upstream in ``test_upstream_parity.py``; here only the texts and the log records.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from litdata import (
    CombinedStreamingDataset,
    ParallelStreamingDataset,
    StreamingDataLoader,
    StreamingDataset,
    StreamingRawDataset,
    complete_dataset,
    merge_datasets,
    optimize,
    train_test_split,
)
from litdata.streaming.cache import Cache
from litdata.utilities.encryption import FernetEncryption, RSAEncryption
from litdata_format import BinaryWriter
from litdata_io.internal import resolve_max_cache_size

DATASET_LOGGER = "litdata.streaming.dataset"  # upstream's logger name, kept so logging set up for it applies


def _write(path: Path, n: int = 6, encryption: Any = None) -> Path:
    writer = BinaryWriter(path, chunk_size=2, encryption=encryption)
    for i in range(n):
        writer.add_item(i, {"id": i})
    writer.done()
    writer.merge()
    return path


def pair(i: int) -> tuple[int, int]:
    return i, i * i


def triple(i: int) -> tuple[int, int, int]:
    return i, i * i, i * i * i


def fails_on_odd(i: int) -> int:
    if i % 2:
        raise ValueError(f"odd input {i}")
    return i


def _warnings_of(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == name and r.levelno == logging.WARNING]


def test_missing_and_unindexed_folders_are_named_in_upstreams_words(tmp_path: Path) -> None:
    missing = tmp_path / "never-written"
    with pytest.raises(FileNotFoundError, match=r"The provided dataset path `.*never-written` does not exist"):
        StreamingDataset(str(missing))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"The provided dataset `.*empty` doesn't contain any index.json file") as e:
        StreamingDataset(str(tmp_path / "empty"))
    assert "no index.json here" in str(e.value)  # and ours still says where it looked


@pytest.mark.parametrize("size", ["500MB", "20GB", 10**9, "24.9GB"])
def test_a_cache_cap_under_25gb_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture, size: Any) -> None:
    data = _write(tmp_path / "data")
    with caplog.at_level(logging.WARNING):
        StreamingDataset(str(data), max_cache_size=size)
    (message,) = _warnings_of(caplog, DATASET_LOGGER)
    assert message.startswith("The provided `max_cache_size` is less than 25GB.")
    assert "max_pre_download" in message  # and says why it matters


@pytest.mark.parametrize("size", ["25GB", "30GB", 10**11, 0.5, "0.9", None])
def test_25gb_or_a_fraction_logs_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture, size: Any) -> None:
    data = _write(tmp_path / "data")
    with caplog.at_level(logging.WARNING):
        StreamingDataset(str(data), max_cache_size=size)
    assert caplog.records == []


def test_an_unset_cache_cap_logs_the_budget_it_takes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="litdata_io"):
        budget = resolve_max_cache_size(None, tmp_path)
    (record,) = [r for r in caplog.records if r.name == "litdata_io"]
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith("max_cache_size is unset; using ")
    assert f"{budget / 1e9:.1f} GB" in record.getMessage() and str(tmp_path) in record.getMessage()


def test_drop_last_false_on_several_ranks_is_a_log_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _write(tmp_path / "data")
    for name, value in {"WORLD_SIZE": "2", "RANK": "0", "GLOBAL_RANK": "0", "NNODES": "1"}.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING):
        assert StreamingDataset(str(data)).drop_last  # the default on several ranks: nothing to say
        assert _warnings_of(caplog, DATASET_LOGGER) == []
        assert not StreamingDataset(str(data), drop_last=False).drop_last
    (message,) = _warnings_of(caplog, DATASET_LOGGER)
    assert message.startswith(
        "You're operating within a distributed environment and have disabled the `drop_last` option. Please note "
        "that this configuration may lead to training interruptions if your system depends on distributed "
        "collectives."
    )
    assert "prefer drop_last=True" in message


@pytest.mark.parametrize(("field", "value", "recorded"), [("seed", 12, 42), ("shuffle", True, False)])
def test_a_resume_with_other_settings_says_so_in_upstreams_words(
    tmp_path: Path, field: str, value: Any, recorded: Any
) -> None:
    data = str(_write(tmp_path / "data", n=12))
    loader = StreamingDataLoader(StreamingDataset(data), batch_size=2)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    other = StreamingDataLoader(StreamingDataset(data, **{field: value}), batch_size=2)
    expected = f"The provided `{field}` state doesn't match the current one. Found `{value}` instead of `{recorded}`"
    with pytest.raises(ValueError, match=expected) as e:
        other.load_state_dict(state)
        next(iter(other))
    assert "force_override_state_dict=True" in str(e.value)


def test_mixing_errors_carry_upstreams_words(tmp_path: Path) -> None:
    dataset = StreamingDataset(str(_write(tmp_path / "data")))
    with pytest.raises(RuntimeError, match="The provided datasets should be instances of the StreamingDataset"):
        CombinedStreamingDataset([dataset, [1, 2]])  # type: ignore[list-item]
    with pytest.raises(RuntimeError, match="The provided datasets should be instances of the StreamingDataset"):
        ParallelStreamingDataset([dataset, range(3)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="When `iterate_over_all` is set to True, the weights argument shouldn't"):
        CombinedStreamingDataset([dataset, dataset], weights=[0.5, 0.5], iterate_over_all=True)
    with pytest.raises(ValueError, match="Invalid batching method: 'rows'"):
        CombinedStreamingDataset([dataset, dataset], batching_method="rows")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`length` must be `None`, an integer, or `float\('inf'\)`"):
        ParallelStreamingDataset([dataset, dataset], length="many")  # type: ignore[arg-type]
    for transform in (lambda: None, lambda a, b, c: a):
        with pytest.raises(ValueError, match="transform function must take 1 or 2 arguments"):
            ParallelStreamingDataset([dataset, dataset], transform=transform)


def test_loader_errors_carry_upstreams_words(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="The provided dataset should be either an instance of StreamingDataset"):
        StreamingDataLoader([1, 2, 3])  # type: ignore[arg-type]
    dataset = StreamingDataset(str(_write(tmp_path / "data")))
    with pytest.raises(ValueError, match="Profiling is supported only with num_workers >= 1"):
        StreamingDataLoader(dataset, profile_batches=2, num_workers=0)


def test_dataset_argument_errors_carry_upstreams_words(tmp_path: Path) -> None:
    data = str(_write(tmp_path / "data"))
    for error in (ValueError, TypeError):  # upstream's type and ours
        with pytest.raises(error, match="Transform should be a callable. Found 'resize'"):
            StreamingDataset(data, transform="resize")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="subsample must be a float with value greater than 0"):
        StreamingDataset(data, subsample=0)
    dataset = StreamingDataset(data)
    with pytest.raises(ValueError, match=r"Each Split should be a float with each value in \[0,1\]"):
        train_test_split(dataset, splits=[1.5, 0.1])
    with pytest.raises(ValueError, match="Splits' sum must be less than 1"):
        train_test_split(dataset, splits=[0.7, 0.5])


def test_encryption_mismatches_carry_upstreams_words(tmp_path: Path) -> None:
    key = FernetEncryption("pw", level="chunk")
    data = str(_write(tmp_path / "data", encryption=key))
    with pytest.raises(ValueError, match="Data is encrypted but no encryption object was provided."):
        StreamingDataset(data)[0]
    with pytest.raises(ValueError, match="Encryption level mismatch."):
        StreamingDataset(data, encryption=FernetEncryption("pw", level="sample"))[0]
    with pytest.raises(ValueError, match="Encryption algorithm mismatch."):
        StreamingDataset(data, encryption=RSAEncryption("pw", level="chunk"))[0]


def test_optimize_errors_carry_upstreams_words(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    run: dict[str, Any] = {"num_workers": 1, "start_method": "fork", "verbose": False}
    optimize(pair, list(range(4)), out, chunk_bytes="64MB", **run)
    with pytest.raises(RuntimeError, match="HINT: If you want to append/overwrite to the existing dataset") as e:
        optimize(pair, list(range(4)), out, chunk_bytes="64MB", **run)
    assert "mode='append'" in str(e.value)
    with pytest.raises(ValueError, match="The provided `mode` should be either `append` or `overwrite`"):
        optimize(pair, list(range(4)), out, chunk_bytes="64MB", mode="replace", **run)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="The config isn't consistent between chunks"):
        optimize(triple, list(range(4)), out, chunk_bytes="64MB", mode="append", **run)
    with pytest.raises(ValueError, match="The provided inputs should be non empty"):
        optimize(pair, [], str(tmp_path / "none"), chunk_size=2, **run)
    with pytest.raises(ValueError, match="Either one of the `chunk_size` or the `chunk_bytes` need to be provided"):
        optimize(pair, [1], str(tmp_path / "both"), chunk_size=2, chunk_bytes="1MB", **run)
    with pytest.raises(ValueError, match="Either one of the `chunk_size` or the `chunk_bytes` need to be provided"):
        Cache(str(tmp_path / "cache"), chunk_size=2, chunk_bytes=100)
    with pytest.raises(RuntimeError, match="We found the following error") as e:
        optimize(fails_on_odd, list(range(4)), str(tmp_path / "fails"), chunk_size=1, **run)
    assert "odd input 1" in str(e.value)  # ours names the input


def test_folder_errors_carry_upstreams_words(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    for error in (ValueError, FileNotFoundError):  # upstream's type and ours
        with pytest.raises(error, match="No files found in"):
            StreamingRawDataset(str(missing))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No files found in"):
        StreamingRawDataset(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="Dataset directory does not exist"):
        complete_dataset(str(missing))
    with pytest.raises(ValueError, match="The input directories needs to be defined"):
        merge_datasets([], str(tmp_path / "merged"))
