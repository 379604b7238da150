"""The fields of a state dict, each checked as it is read: the bad one is named.

A state dict is loaded from a checkpoint file that may have been edited, truncated or written by
anything; a field of the wrong type or size must fail naming it (not with a bare ``TypeError``
deep in the resume, nor by allocating what a million-entry list asks for).

Each reader takes the state dict (or the part holding the field), the field's name, and ``where``
(names the state's owner in errors); each raises a ValueError naming the field when it is missing
or not what it must be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litdata_stream._pass_plan import Topology

__all__ = ["MAX_WORKER_SLOTS", "state_base", "state_int", "state_topology", "state_upstream_order"]

# Ranks times workers a recorded topology may claim: its plans are made per worker.
MAX_WORKER_SLOTS = 1 << 20
_MAX_INT = (1 << 63) - 1


def _field(state: Mapping[str, Any], field: str, where: str) -> Any:
    if not isinstance(state, Mapping):
        raise ValueError(f"{where}: a state dict must be a dict, got {type(state).__name__}")
    if field not in state:
        raise ValueError(f"{where}: the state dict has no {field!r} field; pass a dict its state_dict() made")
    return state[field]


def _refuse(where: str, field: str, value: Any, should: str) -> ValueError:
    shown = f"a list of {len(value)}" if isinstance(value, (list, tuple)) and len(value) > 8 else repr(value)[:100]
    return ValueError(f"{where}: state dict field {field!r} must be {should}, got {shown}; it is not a state dict "
                      "this dataset wrote (edited or damaged?)")  # fmt: skip


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def state_int(
    state: Mapping[str, Any], field: str, where: str, low: int = 0, high: int = _MAX_INT, default: int | None = None
) -> int:
    """``state[field]``, an int from ``low`` to ``high`` (``default`` if missing, unless None)."""
    if default is not None and isinstance(state, Mapping) and field not in state:
        return default
    value = _field(state, field, where)
    if not _is_int(value) or not low <= value <= high:
        raise _refuse(where, field, value, f"an int from {low} to {high}")
    return value


def state_base(state: Mapping[str, Any], field: str, where: str, samples: int) -> list[tuple[int, int]]:
    """``state[field]``: the epoch's positions to read, as ``[start, end)`` pairs within ``samples``."""
    value = _field(state, field, where)
    should = f"a list of [start, end] pairs of positions from 0 to {samples} covering at most {samples} in all"
    if not isinstance(value, (list, tuple)) or len(value) > samples + 1:  # a long list is refused unread
        raise _refuse(where, field, value, should)
    pairs: list[tuple[int, int]] = []
    total = 0
    for pair in value:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:  # pyright: ignore[reportUnknownArgumentType]
            raise _refuse(where, field, value, should)
        start, end = pair  # pyright: ignore[reportUnknownVariableType]
        if not (_is_int(start) and _is_int(end) and 0 <= start <= end <= samples):
            raise _refuse(where, field, value, should)
        total += end - start
        pairs.append((start, end))
    if total > samples:
        raise _refuse(where, field, value, should)
    return pairs


def state_topology(state: Mapping[str, Any], field: str, where: str) -> Topology:
    """``state[field]``: the recorded ``[world_size, num_workers, batch_size, drop_last]``."""
    value = _field(state, field, where)
    should = (
        f"[world_size, num_workers, batch_size, drop_last]: positive ints (at most {MAX_WORKER_SLOTS} ranks "
        "times workers) and a bool"
    )
    if not isinstance(value, (list, tuple)) or len(value) != 4:  # pyright: ignore[reportUnknownArgumentType]
        raise _refuse(where, field, value, should)
    world, workers, batch, drop_last = value  # pyright: ignore[reportUnknownVariableType]
    counts = (world, workers, batch)
    if not all(_is_int(n) and n >= 1 for n in counts) or not isinstance(drop_last, bool):
        raise _refuse(where, field, value, should)
    if world * workers > MAX_WORKER_SLOTS or batch > _MAX_INT:
        raise _refuse(where, field, value, should)
    return Topology(world, workers, batch, drop_last)


def state_upstream_order(state: Mapping[str, Any], field: str, where: str) -> tuple[int, list[Any]] | None:
    """``state[field]`` if there: the epoch read in upstream's order and what rebuilds that order."""
    value = state.get(field)
    if not value:
        return None
    should = "[epoch, [world_size, num_workers, batch_size, drop_last, item_window]]"
    if not (isinstance(value, (list, tuple)) and len(value) == 2):  # pyright: ignore[reportUnknownArgumentType]
        raise _refuse(where, field, value, should)
    epoch, key = value  # pyright: ignore[reportUnknownVariableType]
    if not (_is_int(epoch) and epoch >= 0 and isinstance(key, (list, tuple)) and len(key) == 5):  # pyright: ignore[reportUnknownArgumentType]
        raise _refuse(where, field, value, should)
    return epoch, list(key)  # pyright: ignore[reportUnknownArgumentType]
