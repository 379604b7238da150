"""Reading an index costs what its used values cost (issue 51, 8).

The top level is walked (``_skim``) and only the keys readers use are decoded: an index
with a 64 MB string in a key nobody reads must be read with a few MB of Python allocations (a
subprocess measures the tracemalloc peak; before, the string cost its bytes four times over).
The walk is checked against ``json.loads`` on random objects, with windows down to one byte so
strings, escapes and brackets fall across every window boundary. Entries of other layouts (keys
in other orders, optional keys missing) are read column by column, as the writer's are, and give
what the entry-by-entry check gives.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from litdata_format import ChunkInfo, load_index, parse_index
from litdata_format._index import _skim as skim
from litdata_format._index._dataset_index import ChunkTable

CONFIG = {"chunk_bytes": None, "chunk_size": 4, "data_format": ["int"], "data_spec": '[1, {"a": null}]'}


def _skim(raw: bytes) -> dict[str, Any] | None:
    view = memoryview(raw)
    return skim.skim_object(lambda offset, count: view[offset : offset + count], len(raw))


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([None, True, False, 0, -1.5e3, 12345678901234])
    if kind in (1, 2, 3):
        alphabet = 'ab"\\[]{},: \n\t\u00e9\u2603/'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind in (4, 5):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f'k{i}\\"[': _value(rng, depth + 1) for i in range(rng.randrange(4))}


@pytest.mark.parametrize("window", [1, 2, 3, 7, 64, 1 << 20])
def test_the_walk_agrees_with_json_loads(monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    monkeypatch.setattr(skim, "_WINDOW", window)
    rng = random.Random(window)
    for _ in range(150):
        obj = {key: _value(rng) for key in rng.sample([*skim.USED, "notes", 'x\\"y', "keys"], 4)}
        options: dict[str, Any]
        for options in ({}, {"indent": 2}, {"ensure_ascii": False}, {"separators": (",", ":")}):
            raw = json.dumps(obj, **options).encode()
            expected = {key: (value if key in skim.USED else None) for key, value in obj.items()}
            assert _skim(raw) == expected, raw


@pytest.mark.parametrize(
    "raw",
    [b"", b"[]", b"{", b'{"a": 1', b'{"a" 1}', b'{"a": "x}', b'{"a": [1, 2}', b'{"a": 1} x', b'{"a": 1,}', b"{'a': 1}"],
)
def test_what_cannot_be_walked_is_left_to_json_loads(raw: bytes) -> None:
    assert _skim(raw) is None
    with pytest.raises(ValueError, match="index.json"):
        parse_index(raw, "index.json")


# The process's peak resident memory (VmHWM: this process's own, where ru_maxrss counts the parent's at fork).
_PEAK = """
import sys
import numpy
from litdata_format import load_index
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
before = peak()
index = load_index(sys.argv[1])
print(len(index.chunks), peak() - before)
"""


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_unused_huge_string_is_not_read_into_memory(tmp_path: Path, where: str) -> None:
    """A 64 MB string in an unknown key, before the chunks (not scanned) or after them (scanned).

    The process's peak resident memory grows by the windows read, not by the string (before: by
    its bytes, their text and the string: 200 MB and more).
    """
    chunks = [{"chunk_bytes": 100, "chunk_size": 4, "dim": None, "filename": f"chunk-0-{i}.bin"} for i in range(10)]
    notes = "x" * (64 << 20)
    obj: dict[str, Any] = {"a_notes": notes} if where == "before" else {}
    obj.update({"chunks": chunks, "config": CONFIG, "updated_at": "1", "z_notes": notes if where == "after" else 0})
    (tmp_path / "index.json").write_text(json.dumps(obj))
    del notes, obj
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(tmp_path)], capture_output=True, text=True, timeout=300, check=True
    )
    count, grown = map(int, done.stdout.split())
    assert count == 10
    assert grown < 48 << 20, f"the peak grew by {grown / 2**20:.1f} MiB"


def _mixed(count: int) -> list[dict[str, Any]]:
    rng = random.Random(count)
    entries = []
    for i in range(count):
        entry: dict[str, Any] = {"chunk_bytes": 1000 + i, "chunk_size": 4, "filename": f"chunk-0-{i}.bin"}
        if rng.random() < 0.5:
            entry["dim"] = None if rng.random() < 0.5 else i
        if rng.random() < 0.5:
            entry["checksum"] = f"xxh3_64:{i:016x}"
        items = list(entry.items())
        rng.shuffle(items)
        entries.append(dict(items))
    return entries


def test_entries_of_other_layouts_are_read_as_columns_with_the_same_result(tmp_path: Path) -> None:
    entries = _mixed(500)
    raw = json.dumps({"chunks": entries, "config": CONFIG}).encode()
    (tmp_path / "index.json").write_bytes(raw)
    by_entry = ChunkTable.from_infos(ChunkInfo.from_json(e, "x") for e in entries)
    assert ChunkTable._parse_columns(entries) is not None  # pyright: ignore[reportPrivateUsage] - the fast path taken
    for index in (load_index(tmp_path), parse_index(raw, "index.json")):
        assert list(index.chunks) == list(by_entry)
        assert [info.filename for info in index.chunks] == [e["filename"] for e in entries]


def test_an_entry_missing_a_required_key_is_named(tmp_path: Path) -> None:
    entries = _mixed(20)
    del entries[7]["chunk_size"]
    with pytest.raises(ValueError, match=r"chunks\[7\].*chunk_size"):
        parse_index(json.dumps({"chunks": entries, "config": CONFIG}).encode(), "index.json")
