"""The scan of ``index.json`` (``_scan``) makes exactly the index ``json.loads`` makes, or leaves it to it.

Every index here is parsed twice: from its bytes (``parse_index(raw)`` and ``load_index(path)``,
which scan the chunks list when it has the common shape) and from ``json.loads`` of them
(``parse_index(obj)``, which never scans). Both must give the same columns (file names, sizes,
dims, extra keys, in the same order and types), the same config and timestamp, or the same
error. ``scan_index`` is asked directly too, so the common shapes are known to take the scan
(not only to end up equal through the fallback), with windows down to a few bytes so entries
fall across every window boundary.
"""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from litdata_format import DatasetIndex, load_index, parse_index
from litdata_format._index._scan import scan_index

CONFIG = {"chunk_bytes": None, "chunk_size": 4, "data_format": ["int", "numpy:3"], "data_spec": '[1, {"a": null}]'}


def _scan(raw: bytes, window: int = 1 << 22) -> Any:
    view = memoryview(raw)
    return scan_index(lambda offset, count: view[offset : offset + count], len(raw), window)


def _same(a: DatasetIndex, b: DatasetIndex) -> None:
    ta, tb = a.table, b.table
    assert ta.names == tb.names
    for name in ("chunk_bytes", "chunk_sizes", "dims"):
        x, y = getattr(ta, name), getattr(tb, name)
        assert x.dtype == y.dtype == np.int64
        assert np.array_equal(x, y), name
    ea, eb = ta.extra_columns, tb.extra_columns
    assert list(ea) == list(eb)
    for key in ea:
        assert type(ea[key]) is type(eb[key]), key
        assert ea[key] == eb[key], key
    assert list(ta) == list(tb)
    assert a.config == b.config
    assert a.updated_at == b.updated_at
    assert a.source == b.source
    assert a.to_json()["chunks"] == b.to_json()["chunks"]


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except ValueError as error:
        return f"{type(error).__name__}: {error}"


def _check(raw: bytes, tmp_path: Path, scanned: bool | None = None, windows: tuple[int, ...] = (16, 97, 4096)) -> None:
    """``raw`` read from bytes, from a file and from ``json.loads`` gives one index, or one error."""
    source = str(tmp_path / "index.json")
    (tmp_path / "index.json").write_bytes(raw)
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        obj = None
    fast = _outcome(lambda: parse_index(raw, source))
    from_file = _outcome(lambda: load_index(tmp_path))
    if obj is None:
        assert isinstance(fast, str) and "is not valid JSON" in fast, fast
        assert from_file == fast
        for window in windows:
            assert _scan(raw, window) is None
        return
    slow = _outcome(lambda: parse_index(obj, source))
    if isinstance(slow, str):
        assert fast == slow
        assert from_file == slow
    else:
        assert isinstance(fast, DatasetIndex) and isinstance(from_file, DatasetIndex), (fast, from_file)
        _same(fast, slow)
        _same(from_file, slow)
    results = [_scan(raw, window) for window in windows]
    if scanned is not None:
        assert all((found is not None) == scanned for found in results), [found is not None for found in results]
    for found in results:
        if found is not None and isinstance(slow, DatasetIndex):  # else the config or the totals failed, alike
            table, rest = found
            _same(DatasetIndex(table, rest["config"], rest.get("updated_at"), source), slow)


def _entries(count: int, **fields: Any) -> list[dict[str, Any]]:
    found = []
    for i in range(count):
        entry: dict[str, Any] = {"chunk_bytes": 1000 + i * 37, "chunk_size": 4 + i % 3, "dim": None}
        entry["filename"] = f"chunk-0-{i}.bin"
        entry.update({k: v(i) if callable(v) else v for k, v in fields.items()})
        found.append(entry)
    return found


def _dump(chunks: Any, config: Any = CONFIG, **options: Any) -> bytes:
    return json.dumps({"chunks": chunks, "config": config, "updated_at": "1733000000.5"}, **options).encode()


# -- the shapes writers write: scanned, and the same as json.loads -----------------------------
@pytest.mark.parametrize("count", [1, 2, 3, 50])
def test_what_the_writers_write_is_scanned(tmp_path: Path, count: int) -> None:
    _check(_dump(_entries(count), sort_keys=True), tmp_path, scanned=True)
    with_sums = _entries(count, checksum=lambda i: f"xxh3:{i:016x}", plain_checksum=lambda i: f"xxh3:{i * 7:016x}")
    _check(_dump(with_sums, sort_keys=True), tmp_path, scanned=True)


def test_dims_numbers_and_nulls_mixed(tmp_path: Path) -> None:
    chunks = _entries(40, dim=lambda i: None if i % 3 else i * 1000)
    _check(_dump(chunks, sort_keys=True), tmp_path, scanned=True)
    _check(_dump(_entries(5, dim=7), sort_keys=True), tmp_path, scanned=True)
    no_dim = [{k: v for k, v in entry.items() if k != "dim"} for entry in _entries(6)]
    _check(_dump(no_dim, sort_keys=True), tmp_path, scanned=True)


def test_bounds_of_the_numbers(tmp_path: Path) -> None:
    for value in (0, 9, 10, 2**48 - 1, 2**48):
        _check(_dump(_entries(3, chunk_bytes=value, dim=value), sort_keys=True), tmp_path, scanned=True)
    for value in (2**48 + 1, 10**15, 10**20, -1, 1.0, 1e3, True):
        _check(_dump(_entries(3, chunk_bytes=value), sort_keys=True), tmp_path, scanned=False)
    _check(_dump(_entries(3, dim=-1), sort_keys=True), tmp_path, scanned=False)  # json.loads' table keeps it


def test_whitespace_variants(tmp_path: Path) -> None:
    chunks = _entries(7, checksum=lambda i: f"xxh3:{i}")
    for options in ({"indent": 2}, {"indent": "\t"}, {"separators": (",", ":")}, {"indent": 0}, {}):
        _check(_dump(chunks, sort_keys=True, **options), tmp_path, scanned=True)
        _check(_dump(chunks[:1], sort_keys=True, **options), tmp_path, scanned=True)
    raw = _dump(chunks, sort_keys=True)
    _check(b"\r\n " + raw + b"\n", tmp_path, scanned=True)
    uneven = raw.replace(b'"chunk_size": 5', b'"chunk_size" :5', 1)  # one entry spaced otherwise
    _check(uneven, tmp_path, scanned=False)
    _check(raw.replace(b"}, {", b"},\n{", 2), tmp_path, scanned=False)


def test_keys_in_other_orders_and_other_top_levels(tmp_path: Path) -> None:
    chunks = _entries(5)
    _check(_dump(chunks), tmp_path, scanned=True)  # the writer's order, unsorted: still one template
    shuffled = [dict(reversed(list(entry.items()))) for entry in chunks]
    _check(_dump(shuffled), tmp_path, scanned=True)
    mixed = [dict(reversed(list(entry.items()))) if i % 2 else entry for i, entry in enumerate(chunks)]
    _check(_dump(mixed), tmp_path, scanned=False)
    text = json.dumps({"config": CONFIG, "chunks": chunks}).encode()
    _check(text, tmp_path, scanned=False)
    text = json.dumps({"chunks": chunks, "updated_at": "x", "config": CONFIG, "zzz": [1, {"a": "]"}]}).encode()
    _check(text, tmp_path, scanned=True)
    # A key twice is refused (json.loads would keep the last one), in windows or parsed whole.
    _refused(_dump(chunks, sort_keys=True)[:-1] + b', "chunks": []}', tmp_path, "chunks")
    _refused(_dump(chunks, sort_keys=True)[:-1] + b', "config": null}', tmp_path, "config")


def _refused(raw: bytes, tmp_path: Path, key: str) -> None:
    (tmp_path / "index.json").write_bytes(raw)
    for read in (lambda: parse_index(raw, str(tmp_path / "index.json")), lambda: load_index(tmp_path)):
        with pytest.raises(ValueError, match=rf"index.json: index.json has the key '{key}' twice in one object"):
            read()


def test_extras_of_other_types_are_left_to_json(tmp_path: Path) -> None:
    for value in (None, 3, 1.5, [1, "a"], {"b": "]"}, True, ""):
        _check(_dump(_entries(4, extra=value), sort_keys=True), tmp_path, scanned=value == "")
    some = _entries(4)
    some[2]["checksum"] = "xxh3:1"
    _check(_dump(some, sort_keys=True), tmp_path, scanned=False)
    duplicate = _dump(_entries(3), sort_keys=True).replace(b'"dim": null', b'"dim": null, "dim": 4')
    _refused(duplicate, tmp_path, "dim")


def test_names_that_need_escapes_or_are_refused(tmp_path: Path) -> None:
    names = [
        "ünïcode-0.bin", "日本/chunk.bin", 'quote"d.bin', "back\\slash.bin", "tab\t.bin", "nul\x00.bin", "../up.bin",
        ".hidden", "a//b.bin", "a/", "/abs.bin", "a/.b", "", "a/b/c.bin", "a], \"config\": 1}.bin", "-.bin", "a.",
        "x\u2028y", "😀.bin", "a\x7f.bin",
    ]  # fmt: skip
    for name in names:
        chunks = _entries(3)
        chunks[1]["filename"] = name
        for ascii_only in (True, False):
            _check(_dump(chunks, sort_keys=True, ensure_ascii=ascii_only), tmp_path)
    _check(_dump(_entries(3, filename=lambda i: f"a/b-{i}/c.bin"), sort_keys=True), tmp_path, scanned=True)
    text = _dump(_entries(3, filename=lambda i: f"{i}-{'x' * 300}.bin"), sort_keys=True)
    _check(text, tmp_path, scanned=True, windows=(16, 100, 1000))  # entries longer than the window


def test_mds_and_other_indexes_are_not_scanned(tmp_path: Path) -> None:
    mds = {"shards": [{"column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8], "format": "mds",
                       "raw_data": {"basename": "shard.00000.mds", "bytes": 10, "hashes": {}}, "samples": 1,
                       "size_limit": 100, "version": 2, "zip_data": None}], "version": 2}  # fmt: skip
    _check(json.dumps(mds).encode(), tmp_path, scanned=False)
    _check(_dump([]), tmp_path, scanned=False)
    _check(json.dumps({"chunks": [], "config": None}).encode(), tmp_path, scanned=False)
    _check(_dump([1, 2]), tmp_path, scanned=False)
    _check(_dump([{}]), tmp_path, scanned=False)
    _check(b"[]", tmp_path, scanned=False)
    _check(b"", tmp_path, scanned=False)


def test_damaged_files_give_the_same_errors(tmp_path: Path) -> None:
    raw = _dump(_entries(6, checksum=lambda i: f"s{i}"), sort_keys=True)
    for cut in (1, 15, 40, len(raw) // 2, len(raw) - 30, len(raw) - 1):
        _check(raw[:cut], tmp_path, scanned=False)
    _check(raw + b"x", tmp_path, scanned=False)
    _check(raw.replace(b"chunk-0-3", b"chunk-0-\xff"), tmp_path, scanned=False)
    _check(raw.replace(b'"chunk_size": 5', b'"chunk_size": 05'), tmp_path, scanned=False)
    _check(raw.replace(b'"chunk_size": 5', b'"chunk_size": 5 '), tmp_path, scanned=False)
    _check(raw.replace(b'"config": {', b'"config": {"compression": 3, '), tmp_path)
    _check(raw.replace(b'"data_format": [', b'"data_format": ["no_header_numpy:99", '), tmp_path)
    _check(raw.replace(b"1733000000.5", b"1733000000.5\\x"), tmp_path, scanned=False)


def test_totals_past_int64_are_refused_alike(tmp_path: Path) -> None:
    _check(_dump(_entries(40000, chunk_bytes=2**48), separators=(",", ":")), tmp_path, scanned=True, windows=(1 << 20,))


def test_random_indexes_and_mutations(tmp_path: Path) -> None:
    """Random shapes, values and byte-level damage: the scan agrees with json.loads every time."""
    rng = random.Random(29)
    alphabet = "abc-_./0123456789xyz"
    for _ in range(120):
        count = rng.choice([1, 2, 3, 5, 17, 60])
        extras = rng.sample(["checksum", "plain_checksum", "aaa", "zz_extra"], rng.randint(0, 2))
        chunks = []
        for i in range(count):
            entry: dict[str, Any] = {
                "chunk_bytes": rng.choice([0, 1, 123, 2**32, 2**48, rng.randint(0, 10**9)]),
                "chunk_size": rng.randint(0, 10**6),
                "filename": "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) + f"-{i}",
            }
            if rng.random() < 0.8:
                entry["dim"] = rng.choice([None, None, 0, rng.randint(0, 10**12)])
            for key in extras:
                entry[key] = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
            chunks.append(entry)
        options: dict[str, Any] = rng.choice(
            [{"sort_keys": True}, {"sort_keys": True, "indent": 1}, {"separators": (",", ":"), "sort_keys": True}, {}]
        )
        raw = _dump(chunks, **options)
        windows = (rng.randint(16, 300), 1 << 16)
        _check(raw, tmp_path, windows=windows)
        for _damage in range(3):
            damaged = bytearray(raw)
            at = rng.randrange(len(damaged))
            action = rng.random()
            if action < 0.4:
                damaged[at] = ord(rng.choice('{}[]",: \n0123456789anul\\/.x'))
            elif action < 0.7:
                damaged.insert(at, ord(rng.choice('",: 0\\/.}]')))
            else:
                del damaged[at]
            _check(bytes(damaged), tmp_path, windows=windows)


def test_big_index_across_windows(tmp_path: Path) -> None:
    """50k entries (~5 MB) through the default window, as load_index reads a file."""
    chunks = _entries(50_000, checksum=lambda i: f"xxh3:{i:016x}", dim=lambda i: None if i % 2 else i)
    raw = _dump(chunks, sort_keys=True)
    assert _scan(raw) is not None
    _check(raw, tmp_path, scanned=True, windows=(1 << 20,))


def _opcodes(data: bytes) -> int:
    import pickletools

    return sum(1 for _ in pickletools.genops(data))


def test_the_table_pickles_as_columns() -> None:
    """What a spawned DataLoader worker receives: a few buffers, not an object per chunk.

    About as many pickle opcodes for 20k chunks as for 500 (a dict, a ChunkInfo or a str per
    chunk would add some per chunk), and bytes about the names and checksums plus the columns.
    """
    found = {}
    for count in (500, 20_000):
        chunks = _entries(count, checksum=lambda i: f"xxh3:{i:016x}")
        index = parse_index(_dump(chunks, sort_keys=True))
        data = pickle.dumps(index)
        text_bytes = sum(len(c["filename"]) + len(c["checksum"]) for c in chunks)
        columns = 8 * count * 3 + 4 * (count + 1) * 2  # three int64 columns, two int32 offset arrays
        assert len(data) <= text_bytes + columns + 4096, (len(data), text_bytes + columns)
        _same(pickle.loads(data), index)
        found[count] = _opcodes(data)
    assert found[20_000] - found[500] < 50  # a few more frames of bytes, nothing per chunk (19,500 more)
