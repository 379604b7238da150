"""The top level of an ``index.json`` read value by value, skipping the values no reader uses.

The members are found by walking the file's bytes in windows (strings skipped by their closing
quote, objects and lists by their brackets), and only the values of the keys readers use
(:data:`USED`) are decoded; any other key is kept with the value None, so messages can still list
it. A 200 MB string in a key no one reads is never built. A file the walk cannot follow gives
None, and the caller parses it whole with ``json.loads``, whose error says what is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["CHECK_EVERY_KEY_BELOW", "USED", "DuplicateKeyError", "Read", "loads_unique", "skim_members", "skim_object"]

# A key twice in one object is refused. Checking every object costs a Python call per object (1.8x
# json.loads on a list of chunk entries): a value bigger than this is checked at its top level only.
CHECK_EVERY_KEY_BELOW = 16 << 20

# Reads ``count`` bytes at ``offset`` (fewer at the end): a file's pread, or a slice of bytes.
Read = Callable[[int, int], bytes | memoryview]

# The top-level keys of a LitData or MosaicML index that anything reads.
USED = frozenset({"chunks", "config", "updated_at", "shards", "version"})
_WINDOW = 1 << 20
_WS = b" \t\n\r"
_SCALAR_END = re.compile(rb"[,}\]\s]")
_SCALAR = 4096  # the longest number or literal walked
_QUOTE, _BACKSLASH = 0x22, 0x5C
_EVENTS = np.zeros(256, dtype=bool)  # the bytes that open or close a string, object or list
_EVENTS[list(b'"[]{}')] = True
_STEP = np.zeros(256, dtype=np.int8)  # what each does to the nesting depth
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


class _Malformed(Exception):
    """Not a structure this walk reads: the caller parses the file whole."""


class _Bytes:
    """The file's bytes, read a window at a time (positions are the file's)."""

    def __init__(self, read: Read, size: int) -> None:
        self.read, self.size = read, size
        self.start, self.data = 0, b""

    def _load(self, pos: int) -> None:
        if not self.start <= pos < self.start + len(self.data):
            self.start, self.data = pos, bytes(self.read(pos, _WINDOW))

    def at(self, pos: int) -> int:
        if pos >= self.size:
            raise _Malformed
        self._load(pos)
        return self.data[pos - self.start]

    def past_space(self, pos: int) -> int:
        while pos < self.size:
            self._load(pos)
            for offset in range(pos - self.start, len(self.data)):
                if self.data[offset] not in _WS:
                    return self.start + offset
            pos = self.start + len(self.data)
        return pos

    def _escaped(self, quote: int) -> bool:
        """Whether the quote at ``quote`` follows an odd run of backslashes."""
        run, pos = 0, quote - 1
        while pos >= 0 and self.at(pos) == _BACKSLASH:
            run, pos = run + 1, pos - 1
        self._load(quote)
        return run % 2 == 1

    def string_end(self, pos: int) -> int:
        """Where the string whose opening quote is at ``pos`` ends (past its closing quote)."""
        pos += 1
        while pos < self.size:
            self._load(pos)
            found = self.data.find(b'"', pos - self.start)
            if found < 0:
                pos = self.start + len(self.data)
                continue
            quote = self.start + found
            if not self._escaped(quote):
                return quote + 1
            pos = quote + 1
        raise _Malformed

    def value_end(self, pos: int) -> int:
        """Where the value starting at ``pos`` ends."""
        first = self.at(pos)
        if first == _QUOTE:
            return self.string_end(pos)
        if first not in b"[{":  # a number or a literal: short
            data = bytes(self.read(pos, _SCALAR))
            match = _SCALAR_END.search(data)
            if match is not None:
                return pos + match.start()
            if pos + len(data) < self.size:
                raise _Malformed
            return self.size
        return self._container_end(pos)

    def _container_end(self, pos: int) -> int:
        """Where the object or list opening at ``pos`` ends: brackets counted outside strings, a window at a time.

        Only the quotes and brackets of a window are looked at (numpy over their places); a
        quote after an odd run of backslashes is a string's content.
        """
        depth, inside, backslashes = 0, 0, 0  # carried from one window to the next
        while pos < self.size:
            window = np.frombuffer(self.read(pos, _WINDOW), dtype=np.uint8)
            if not len(window):
                break
            events = np.flatnonzero(_EVENTS[window])
            kinds = window[events]
            flips = kinds == _QUOTE
            slashed = window == _BACKSLASH
            if slashed.any():  # rare in an index: quotes escaped in strings
                places = np.arange(len(window), dtype=np.int64)
                last_plain = np.maximum.accumulate(np.where(slashed, -1, places))
                quotes = events[flips]
                before = last_plain[np.maximum(quotes - 1, 0)]
                run = np.where(before >= 0, quotes - 1 - before, quotes + backslashes)
                run[quotes == 0] = backslashes
                flips[flips] = run % 2 == 0
                tail = len(window) - 1 - int(last_plain[-1])
                backslashes = backslashes + len(window) if last_plain[-1] < 0 else tail
            else:
                if backslashes % 2 and len(events) and events[0] == 0 and flips[0]:
                    flips[0] = False  # escaped by the backslashes that ended the window before
                backslashes = 0
            in_string = (np.cumsum(flips, dtype=np.int64) + inside) & 1
            step = _STEP[kinds]
            step[in_string == 1] = 0
            level = np.cumsum(step, dtype=np.int64) + depth
            closed = np.flatnonzero((level == 0) & (step == -1))
            if len(closed):
                return pos + int(events[closed[0]]) + 1
            if len(events):
                depth, inside = int(level[-1]), int(in_string[-1])
            pos += len(window)
        raise _Malformed

    def expect(self, pos: int, byte: bytes) -> int:
        """The position past ``byte`` (after optional whitespace) at ``pos``."""
        pos = self.past_space(pos)
        if self.at(pos) != byte[0]:
            raise _Malformed
        return pos + 1

    def decode(self, start: int, end: int) -> Any:
        try:
            data = bytes(self.read(start, end - start))
            return loads_unique(data.decode("utf-8")) if len(data) <= CHECK_EVERY_KEY_BELOW else json.loads(data)
        except DuplicateKeyError:
            raise
        except (ValueError, RecursionError):
            raise _Malformed from None


class DuplicateKeyError(ValueError):
    """A JSON object has ``key`` twice (``json.loads`` would keep the last one silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKeyError(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return found


def loads_unique(text: str) -> Any:
    """``json.loads`` of ``text``, refusing an object with a key twice.

    Raises:
        DuplicateKeyError: names the key.
    """
    return json.loads(text, object_pairs_hook=_unique)


def _members(source: _Bytes, pos: int, found: dict[str, Any]) -> dict[str, Any]:
    """Read members from ``pos`` (a key's opening quote, after whitespace) to the object's ``}``."""
    while True:
        pos = source.past_space(pos)
        if source.at(pos) != 0x22:
            raise _Malformed
        key_end = source.string_end(pos)
        key = source.decode(pos, key_end)
        if key in found:
            raise DuplicateKeyError(key)
        start = source.past_space(source.expect(key_end, b":"))
        end = source.value_end(start)
        found[key] = source.decode(start, end) if key in USED else None
        pos = source.past_space(end)
        if source.at(pos) == 0x7D:  # }
            if source.past_space(pos + 1) != source.size:
                raise _Malformed  # something after the object
            return found
        pos = source.expect(pos, b",")


def skim_object(read: Read, size: int) -> dict[str, Any] | None:
    """The index's top-level object, with None for the values of keys no reader uses; None if not walkable.

    ``read(offset, count)`` reads the file's bytes (fewer at its end); ``size`` is the file's size.
    """
    source = _Bytes(read, size)
    try:
        pos = source.past_space(source.expect(0, b"{"))
        if source.at(pos) == 0x7D:
            return {} if source.past_space(pos + 1) == size else None
        return _members(source, pos, {})
    except _Malformed:
        return None


def skim_members(read: Read, size: int, pos: int) -> dict[str, Any] | None:
    """The members after the member that ends at ``pos`` (the chunk list's ``]``), as :func:`skim_object` reads them."""
    source = _Bytes(read, size)
    try:
        return _members(source, source.expect(pos, b","), {})
    except _Malformed:
        return None
