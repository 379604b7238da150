"""The fast reading of ``index.json``: its ``chunks`` list scanned as bytes, with no dict per chunk.

``json.loads`` of an index of a million chunks builds a dict per entry (seconds of CPU and
hundreds of bytes per chunk). Writers (ours and upstream's) write every entry alike with
``json.dumps(..., sort_keys=True)``, so the list is one byte template repeated, whose slots hold
the values. This module learns that template from the first entry and checks every other entry
against it with numpy, in windows of a few MiB (the peak memory is the columns and one window):

- the quotes (``"``) of the list: with no backslash in it, each is a string's start or end, so
  an entry is a fixed number of quotes; every key must sit in its place with its exact bytes;
- the bytes between strings must be the first entry's, byte for byte (separators and
  whitespace), around the number slots, whose digits (or ``null``) are parsed as int64;
- the strings may hold no control character and no byte above 127, and file names must be
  paths inside the dataset (``check_chunk_filename``'s rule).

The first ``]`` followed by ``, "`` ends the list (under the checks above it can only be the
list's own); of what follows, only the values readers use (``config``, ``updated_at``) are
decoded (``_skim``: a 200 MB string in another key is skipped, not built).
Anything else (escapes, other whitespace per entry, keys in another order, values of other types,
numbers past 2**48, MosaicML's ``shards``) is not scanned: the caller parses the index as before,
so its errors, which name the file, the entry and the field, are unchanged. What the scan accepts
is exactly what that parse makes of it (``tests/test_index_scan.py`` compares the two).
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from litdata_format._index._dataset_index import ChunkTable, Strings
from litdata_format._index._skim import Read, skim_members

__all__ = ["WINDOW", "scan_index"]

_WS = rb"[ \t\n\r]*"  # JSON's whitespace (\s would take \f and \v too)
_HEAD = re.compile(rb"\A" + _WS + rb"\{" + _WS + rb'"chunks"' + _WS + rb":" + _WS + rb"\[")
_OPEN = re.compile(_WS + rb"\{" + _WS)
_KEY = re.compile(rb'"([^"\\\x00-\x1f\x80-\xff]*)"(' + _WS + rb":" + _WS + rb")")
_STRING = re.compile(rb'"[^"\\\x00-\x1f\x80-\xff]*"')
_NUMBER = re.compile(rb"0|[1-9][0-9]{0,14}|null")
_NEXT_KEY = re.compile(_WS + rb"," + _WS + rb'(?=")')
_CLOSE = re.compile(_WS + rb"\}")
_BETWEEN = re.compile(_WS + rb"\}" + _WS + rb"," + _WS + rb"\{" + _WS + rb'(?=")')
_LAST = re.compile(_WS + rb"\}" + _WS)
# The end of the list: the first "]" followed by ", " and a key. Inside a checked entry a "]" can
# only be in a string, and a string cannot hold an unescaped quote: so it is the list's own, or
# the window's checks fail and the index is parsed the usual way.
_END = re.compile(rb"\]" + _WS + rb"," + _WS + rb'"')

_INT_KEYS = ("chunk_bytes", "chunk_size", "dim")
WINDOW = 4 << 20
_MAX_WINDOW = 64 << 20
_DIGITS = 15  # 2**48, the largest count an index may hold, has 15 digits
_POW10 = 10 ** np.arange(_DIGITS - 1, -1, -1, dtype=np.int64)
_MAX_COUNT = 1 << 48
_NULL = np.frombuffer(b"null", dtype=np.uint8)
_QUOTE, _BACKSLASH, _SLASH, _DOT = 34, 92, 47, 46


@dataclass(frozen=True)
class _Slot:
    """One key of the template: its name, the bytes from its closing quote to its value, and the value's kind."""

    key: str
    colon: bytes
    string: bool  # a string value; else a number or null


@dataclass(frozen=True)
class _Gap:
    """Bytes between a closing quote and the next quote (of the entry, or the next entry's first).

    ``prefix`` then, where ``slot`` is not None, that slot's number or ``null``, then ``suffix``.
    """

    quote: int  # the closing quote's place among the entry's quotes
    prefix: bytes
    slot: str | None
    suffix: bytes


class _NotScanned(Exception):
    """The index is not of the common shape (or is not valid JSON): it is parsed the usual way."""


def _entry(data: bytes, pos: int) -> tuple[list[tuple[_Slot, bytes]], list[bytes], int]:
    """Tokenise one entry from its first key's quote: its slots with their values, the bytes after each value, the end.

    The bytes after the last value are the closing brace and the whitespace after it.
    """
    slots: list[tuple[_Slot, bytes]] = []
    after: list[bytes] = []
    while True:
        key = _KEY.match(data, pos)
        if key is None:
            raise _NotScanned
        pos = key.end()
        value = _STRING.match(data, pos) or _NUMBER.match(data, pos)
        if value is None:
            raise _NotScanned
        string = value.group().startswith(b'"')
        slots.append((_Slot(key.group(1).decode("ascii"), key.group(2), string), value.group()))
        pos = value.end()
        more = _NEXT_KEY.match(data, pos)
        if more is not None:
            after.append(more.group())
            pos = more.end()
            continue
        close = _CLOSE.match(data, pos)
        if close is None:
            raise _NotScanned
        after.append(close.group())
        return slots, after, close.end()


@dataclass
class _Template:
    """The entries' shape: their slots, quotes per entry, and the gaps between quotes."""

    slots: list[_Slot]
    quotes: int
    key_quotes: list[tuple[int, bytes]]  # (opening quote's place, the key's bytes)
    strings: list[tuple[int, str]]  # (opening quote's place, key) of each string value
    gaps: list[_Gap]  # in quote order; the last runs into the next entry
    numbers: set[str]  # the keys whose values are numbers (or null)
    smallest: int  # the fewest bytes an entry of this shape takes, separators included

    @classmethod
    def learn(cls, slots: list[_Slot], after: list[bytes]) -> _Template:
        keys = [slot.key for slot in slots]
        if len(set(keys)) != len(keys) or not {"filename", "chunk_bytes", "chunk_size"} <= set(keys):
            raise _NotScanned
        kinds = {slot.key: slot.string for slot in slots}
        if not kinds["filename"] or any(kinds.get(key, False) for key in _INT_KEYS):
            raise _NotScanned
        if any(not slot.string and slot.key not in _INT_KEYS for slot in slots):
            raise _NotScanned  # a number or null among the other keys: the usual parse keeps those
        quote = 0
        key_quotes: list[tuple[int, bytes]] = []
        strings: list[tuple[int, str]] = []
        gaps: list[_Gap] = []
        for slot, tail in zip(slots, after):
            key_quotes.append((quote, slot.key.encode("ascii")))
            if slot.string:
                strings.append((quote + 2, slot.key))
                gaps.append(_Gap(quote + 1, slot.colon, None, b""))
                gaps.append(_Gap(quote + 3, tail, None, b""))
                quote += 4
            else:
                gaps.append(_Gap(quote + 1, slot.colon, slot.key, tail))
                quote += 2
        numbers = {slot.key for slot in slots if not slot.string}
        # Keys and their quotes, the literals, two quotes per string value, a digit per number.
        smallest = sum(len(slot.key) + 2 for slot in slots) + sum(len(gap.prefix) + len(gap.suffix) for gap in gaps)
        smallest += 2 * len(strings) + len(numbers)
        return cls(slots, quote, key_quotes, strings, gaps, numbers, max(smallest, 1))


class _Columns:
    """The columns the windows fill, allocated once at a bound and cut to size at the end.

    Pages never written cost no memory (``np.empty``), and nothing is joined from per-window
    pieces: the peak stays near the columns' own size. ``entries`` bounds the entries (the list's
    bytes over the smallest entry's), ``text`` the bytes of a string column (the list's bytes).
    """

    def __init__(self, template: _Template, entries: int, text: int) -> None:
        self.entries = entries
        self.ints = {key: np.empty(entries, dtype=np.int64) for key in _INT_KEYS if key in template.numbers}
        self.filled = dict.fromkeys(self.ints, 0)
        keys = [key for _, key in template.strings]
        self.texts = {key: np.empty(text, dtype=np.uint8) for key in keys}
        self.used = dict.fromkeys(keys, 0)
        self.lengths = {key: np.empty(entries, dtype=np.int32) for key in keys}  # a string fits a window
        self.taken = dict.fromkeys(keys, 0)

    def put_ints(self, key: str, values: np.ndarray) -> None:
        """Append ``values`` to column ``key``."""
        at = self.filled[key]
        if at + len(values) > self.entries:
            raise _NotScanned  # more entries than the bound allows: not this shape after all
        self.ints[key][at : at + len(values)] = values
        self.filled[key] = at + len(values)

    def put_strings(self, key: str, window: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """Append the strings ``window[lo[i]:hi[i]]`` to column ``key``."""
        lengths = hi - lo
        total = int(lengths.sum())
        at, taken = self.used[key], self.taken[key]
        if taken + len(lengths) > self.entries or at + total > len(self.texts[key]):
            raise _NotScanned
        starts = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        where = np.repeat(lo - starts, lengths)
        where += np.arange(total, dtype=np.int64)
        np.take(window, where, out=self.texts[key][at : at + total])
        self.lengths[key][taken : taken + len(lengths)] = lengths
        self.used[key], self.taken[key] = at + total, taken + len(lengths)

    def int_column(self, key: str) -> np.ndarray | None:
        """Column ``key``, cut to its entries (the unused tail is given back, not copied)."""
        column = self.ints.get(key)
        if column is None:
            return None
        column.resize((self.filled[key],), refcheck=False)
        return column

    def string_column(self, key: str) -> Strings:
        """Column ``key`` as joined strings (its bytes are ASCII: checked)."""
        lengths = self.lengths.pop(key)
        lengths.resize((self.taken[key],), refcheck=False)
        text = self.texts.pop(key)
        joined = str(text[: self.used[key]].data, "ascii")
        del text  # the bytes, before the next column's str is made
        return Strings.from_joined(joined, lengths)


def _same(window: np.ndarray, at: np.ndarray, literal: bytes) -> bool:
    """Whether ``window[at[i]:at[i] + len(literal)]`` is ``literal`` for every i."""
    if not literal:
        return True
    expected = np.frombuffer(literal, dtype=np.uint8)
    return bool((window[at[:, None] + np.arange(len(literal))] == expected).all())


def _numbers(window: np.ndarray, start: np.ndarray, end: np.ndarray, nullable: bool) -> np.ndarray:
    """The numbers (``null`` as -1 when ``nullable``) in ``window[start[i]:end[i]]``."""
    length = end - start
    if not ((length >= 1) & (length <= _DIGITS)).all():
        raise _NotScanned
    null = length == 4
    if null.any():
        null[null] = (window[start[null, None] + np.arange(4)] == _NULL).all(axis=1)
        if null.any() and not nullable:
            raise _NotScanned
    width = int(length.max())  # the longest number of this window: fewer columns than 15
    columns = np.arange(width)
    used = columns >= (width - length)[:, None]
    used[null] = False
    at = np.maximum(end[:, None] - width + columns, 0)
    digits = window[at].astype(np.int64) - 48
    if not ((~used) | ((digits >= 0) & (digits <= 9))).all():
        raise _NotScanned
    if ((length > 1) & ~null & (window[start] == 48)).any():
        raise _NotScanned  # a leading zero is not JSON
    values = np.where(used, digits, 0) @ _POW10[_DIGITS - width :]
    if (values > _MAX_COUNT).any():
        raise _NotScanned
    values[null] = -1
    return values


def _safe_names(window: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
    """Refuse file names that ``check_chunk_filename`` refuses: empty, hidden or empty parts.

    No backslash or NUL is anywhere in the list by then.
    """
    if not (hi > lo).all() or (window[lo] == _DOT).any() or (window[lo] == _SLASH).any():
        raise _NotScanned
    slashes = np.flatnonzero(window[: int(hi[-1])] == _SLASH)
    if not len(slashes):
        return
    name = np.searchsorted(lo, slashes, side="right") - 1
    inside = (name >= 0) & (slashes < hi[np.maximum(name, 0)])
    slashes = slashes[inside]
    following = window[slashes + 1]
    if ((following == _SLASH) | (following == _DOT) | (following == _QUOTE)).any():
        raise _NotScanned


def _no_controls(window: np.ndarray, end: int, ranges: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Refuse a control character inside a string value (JSON forbids them unescaped)."""
    controls = np.flatnonzero(window[:end] < 0x20)
    if not len(controls):
        return
    for lo, hi in ranges:
        found = np.searchsorted(lo, controls, side="right") - 1
        if ((found >= 0) & (controls < hi[np.maximum(found, 0)])).any():
            raise _NotScanned


def _scan_window(window: np.ndarray, template: _Template, end: int | None, columns: _Columns) -> int:
    """Check and take the whole entries of ``window`` (which starts at an entry's first quote).

    ``end`` is where the list's ``]`` is when it is in the window. Returns where the next window
    starts (the first quote of the first entry not taken), or -1 after the last entry.
    """
    per = template.quotes
    limit = len(window) if end is None else end
    quotes = np.flatnonzero(window[:limit] == _QUOTE)
    if end is None:
        count = len(quotes) // per - 1  # the next entry's first quote ends an entry's last gap
        if count < 1:
            return 0
        following = quotes[per : (count + 1) * per : per]
        last = int(following[-1])
    else:
        if len(quotes) % per or not len(quotes):
            raise _NotScanned
        count = len(quotes) // per
        following = np.append(quotes[per::per], end).astype(np.int64)
        last = end
    marks = quotes[: count * per].reshape(count, per)
    part = window[:last]
    if not len(part) or int(part.max()) >= 0x80 or (part == _BACKSLASH).any():
        raise _NotScanned
    for place, key in template.key_quotes:
        lo, hi = marks[:, place] + 1, marks[:, place + 1]
        if not ((hi - lo) == len(key)).all() or not _same(window, lo, key):
            raise _NotScanned
    final = end is not None
    for gap in template.gaps:
        start = marks[:, gap.quote] + 1
        stop = following if gap.quote + 1 == per else marks[:, gap.quote + 1]
        if final and gap.quote + 1 == per:
            start, stop = start[:-1], stop[:-1]  # the list's last entry ends in "}" and the "]": checked apart
            if not len(start):
                continue
        if gap.slot is None:
            if not ((stop - start) == len(gap.prefix)).all() or not _same(window, start, gap.prefix):
                raise _NotScanned
            continue
        inner_start, inner_end = start + len(gap.prefix), stop - len(gap.suffix)
        if not (inner_end > inner_start).all():
            raise _NotScanned
        if not _same(window, start, gap.prefix) or not _same(window, inner_end, gap.suffix):
            raise _NotScanned
        columns.put_ints(gap.slot, _numbers(window, inner_start, inner_end, gap.slot == "dim"))
    if final:
        _last_entry(window, template, marks[-1], end, columns)
    ranges = [(marks[:, place] + 1, marks[:, place + 1]) for place, _ in template.strings]
    _no_controls(window, last, ranges)
    for (_, key), (lo, hi) in zip(template.strings, ranges):
        if key == "filename":
            _safe_names(window, lo, hi)
        columns.put_strings(key, window, lo, hi)
    return -1 if final else int(following[-1])


def _last_entry(window: np.ndarray, template: _Template, marks: np.ndarray, end: int, columns: _Columns) -> None:
    """Check the bytes from the list's last entry's last quote to the ``]``, and take its last number if any."""
    gap = template.gaps[-1]
    tail = window[int(marks[gap.quote]) + 1 : end].tobytes()
    if gap.slot is None:
        if _LAST.fullmatch(tail) is None:
            raise _NotScanned
        return
    if not tail.startswith(gap.prefix):
        raise _NotScanned
    number = _NUMBER.match(tail, len(gap.prefix))
    if number is None or _LAST.fullmatch(tail, number.end()) is None:
        raise _NotScanned
    text = number.group()
    value = -1 if text == b"null" else int(text)
    if value > _MAX_COUNT or (value < 0 and gap.slot != "dim"):
        raise _NotScanned
    columns.put_ints(gap.slot, np.array([value], dtype=np.int64))


def _list_end(data: bytes) -> int | None:
    """Where the first ``]`` followed by ``, "`` is in ``data`` (a "]" is rare in a chunk list: found by memchr)."""
    at = data.find(b"]")
    while at >= 0:
        if _END.match(data, at) is not None:
            return at
        at = data.find(b"]", at + 1)
    return None


def _learn(read: Read, offset: int) -> _Template:
    """The template of the entry whose first quote is at ``offset`` (and of the bytes that lead to the next)."""
    probe = 1 << 16
    while True:
        data = bytes(read(offset, probe))
        try:
            slots, after, stop = _entry(data, 0)
        except _NotScanned:
            if len(data) < probe or probe >= _MAX_WINDOW:
                raise
            probe *= 4  # the entry may be cut by the end of what was read
            continue
        between = _BETWEEN.match(data, stop - len(after[-1]))
        if between is not None:
            after[-1] = between.group()  # what runs from the last value into the next entry's first quote
        return _Template.learn([slot for slot, _ in slots], after)


def _scan(read: Read, size: int, window_size: int) -> tuple[ChunkTable, dict[str, Any]]:
    head = bytes(read(0, min(size, 4096)))
    opening = _HEAD.match(head)
    if opening is None:
        raise _NotScanned
    first = _OPEN.match(head, opening.end())
    if first is None:
        raise _NotScanned
    offset = first.end()  # the first entry's first quote
    template = _learn(read, offset)
    columns = _Columns(template, (size - offset) // template.smallest + 1, size - offset)
    list_end = -1
    data = bytes(read(offset, window_size))
    while True:
        end = _list_end(data)
        if end is None and len(data) < window_size and offset + len(data) >= size:
            raise _NotScanned  # the file ends inside the list
        moved = _scan_window(np.frombuffer(data, dtype=np.uint8), template, end, columns)
        if moved < 0:
            assert end is not None
            list_end = offset + end
            break
        if moved == 0:  # an entry longer than the window
            window_size *= 2
            if window_size > _MAX_WINDOW:
                raise _NotScanned
        offset += moved
        data = bytes(read(offset, window_size))
    rest = _tail(read, size, list_end)
    return _table(template, columns), rest


def _tail(read: Read, size: int, list_end: int) -> dict[str, Any]:
    """The index's other keys (``config``, ``updated_at``): the members after the list, unused values skipped."""
    rest = skim_members(read, size, list_end + 1)
    if rest is None or "chunks" in rest:
        raise _NotScanned  # not valid JSON, or a second "chunks" key, which would win in json.loads
    return rest


def _table(template: _Template, columns: _Columns) -> ChunkTable:
    sizes, nbytes = columns.int_column("chunk_size"), columns.int_column("chunk_bytes")
    dims = columns.int_column("dim")
    assert sizes is not None and nbytes is not None
    if dims is None:
        dims = np.full(len(sizes), -1, dtype=np.int64)
    names = columns.string_column("filename")
    extras = {
        slot.key: columns.string_column(slot.key) for slot in template.slots if slot.key != "filename" and slot.string
    }
    if not len(names) == len(sizes) == len(nbytes) == len(dims) or any(len(e) != len(names) for e in extras.values()):
        raise _NotScanned
    return ChunkTable(names, nbytes, sizes, dims, extras)


def scan_index(read: Read, size: int, window: int = WINDOW) -> tuple[ChunkTable, dict[str, Any]] | None:
    """The chunks of an ``index.json`` of the common shape as a table, and its other keys; None for any other.

    ``read`` and ``size`` are as for :func:`~litdata_format._index._skim.skim_object`; ``window``
    is the bytes read and checked at once (doubled for an entry that does not fit).

    Returns:
        The chunk table and the decoded object without ``chunks`` (``config``, ``updated_at``,
        not checked yet), or None when the index is not of the shape the scan reads: parse it
        with ``json.loads`` then, which also says what is wrong with it.
    """
    try:
        found = _scan(read, size, max(window, 16))
    except _NotScanned:
        return None
    if size >= _TRIM_ABOVE:
        _give_back()
    return found


# An index this big leaves tens of MiB of freed windows and temporaries in the C heap.
_TRIM_ABOVE = 1 << 20


def _give_back() -> None:
    """Hand the heap's freed pages back to the system (glibc's ``malloc_trim``; a no-op elsewhere).

    glibc keeps what the scan freed (its windows raise the size below which it allocates from the
    heap) for reuse, so without this the process keeps ~10-20 MiB more than the columns it made.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS), or no C library by that name
        return
    trim(0)
