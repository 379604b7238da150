"""Reading and writing ``index.json.zstd`` a block of files at a time.

The bytes are upstream LitData's: one zstd frame of the UTF-8 JSON object
``{"source": ..., "files": [{"path": ..., "size": ...}, ...], "created_at": ...}``. Upstream's
one-shot ``zstd.decompress`` refuses a frame without its content size, so the writer measures the
JSON first, then streams it into a compressor told that size. Neither side holds the whole text.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring_ascii
from typing import IO, Any

import zstandard

from litdata_raw._file_list import FileList, FileListBuilder, FileMetadata

__all__ = ["read_index", "write_index"]

_BLOCK = 4096  # files encoded per piece of JSON (~1 MiB of transient objects)
_READ = 1 << 20  # decompressed bytes parsed per read
_SPACE = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,")
_CLOSED = re.compile(r"[ \t\n\r]*[,:\]}]")
_LEVEL = 3


def _blocks(files: Sequence[FileMetadata]) -> Iterator[tuple[list[str], list[int]]]:
    if isinstance(files, FileList):
        yield from files.blocks(_BLOCK)
        return
    for start in range(0, len(files), _BLOCK):
        block = files[start : start + _BLOCK]
        yield [f.path for f in block], [int(f.size) for f in block]


def _pieces(files: Sequence[FileMetadata], source: str, created_at: float) -> Iterator[bytes]:
    """The index's JSON, in pieces of ASCII (``json.dumps``'s layout, non-ASCII escaped)."""
    yield f'{{"source": {encode_basestring_ascii(source)}, "files": ['.encode("ascii")
    first = True
    for paths, sizes in _blocks(files):
        text = ", ".join(
            f'{{"path": {encode_basestring_ascii(path)}, "size": {size}}}'
            for path, size in zip(paths, sizes, strict=True)
        )
        yield (text if first else ", " + text).encode("ascii")
        first = False
    yield f'], "created_at": {json.dumps(created_at)}}}'.encode("ascii")


def write_index(handle: IO[bytes], files: Sequence[FileMetadata], source: str) -> None:
    """Write to ``handle`` the ``index.json.zstd`` listing ``files`` of the dataset at ``source`` (URL or folder)."""
    created_at = time.time()
    size = sum(len(piece) for piece in _pieces(files, source, created_at))
    compressor = zstandard.ZstdCompressor(level=_LEVEL, write_content_size=True)
    with compressor.stream_writer(handle, size=size, closefd=False) as writer:
        for piece in _pieces(files, source, created_at):
            writer.write(piece)


class _Parser:
    """A pull parser over a stream of JSON text: values one at a time, the buffer refilled as needed."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._decoder = json.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._batch = True  # whether values() may try the buffer (until it fails, then until a read)

    def _fill(self) -> bool:
        if self._eof:
            return False
        data = self._stream.read(_READ)
        if not data:
            self._eof = True
            self._buf = self._buf[self._pos :] + self._text.decode(b"", final=True)
        else:
            self._buf = self._buf[self._pos :] + self._text.decode(data)
        self._pos = 0
        self._batch = True
        return True

    def _skip_space(self) -> None:
        while True:
            self._pos = _SPACE.match(self._buf, self._pos).end()  # pyright: ignore[reportOptionalMemberAccess] - matches empty
            if self._pos < len(self._buf) or not self._fill():
                return

    def peek(self) -> str:
        """The next character that is not white space (``""`` at the end)."""
        self._skip_space()
        return self._buf[self._pos : self._pos + 1]

    def punct(self, allowed: str) -> str:
        """The next structural character, one of ``allowed``."""
        self._skip_space()
        if self._pos >= len(self._buf) or self._buf[self._pos] not in allowed:
            found = self._buf[self._pos : self._pos + 20] or "the end of the file"
            raise ValueError(f"expected one of {allowed!r} at {found!r}")
        self._pos += 1
        return self._buf[self._pos - 1]

    def values(self) -> list[Any] | None:
        """The array items whole in the buffer, parsed in one call; None if that cannot be done.

        Cut after the buffer's last ``}`` that a ``,`` follows (upstream's items hold no nested
        object, so an item's ``}`` ends it). If that one is inside a string the piece does not
        parse: then the caller reads one value at a time until the next read (no second try on
        the same text, which would make a pathological index quadratic).
        """
        if not self._batch:
            return None
        self._skip_space()
        cut = self._buf.rfind("}", self._pos)
        while cut >= 0 and not _COMMA.match(self._buf, cut + 1):
            cut = self._buf.rfind("}", self._pos, cut)
        if cut < 0:
            return None
        try:
            items = self._decoder.decode("[" + self._buf[self._pos : cut + 1] + "]")
        except json.JSONDecodeError:
            self._batch = False
            return None
        self._pos = cut + 1
        return items if isinstance(items, list) else None

    def value(self) -> Any:
        """The next JSON value (a small one: the whole of it is buffered)."""
        self._skip_space()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                if self._fill():
                    continue
                raise
            # A value cut by the end of the buffer may parse as a shorter one ("17" of "17.5"):
            # trust it only once the character that closes it (after every value of an object
            # or array) is read too.
            if not _CLOSED.match(self._buf, end) and self._fill():
                continue
            self._pos = end
            return value


def read_index(stream: IO[bytes], name: str) -> FileList:
    """The files of the ``index.json.zstd`` read from ``stream`` (memory beyond them stays about a MiB).

    Raises:
        ValueError: the bytes are not a zstd-compressed index of files (``name`` says which).
    """
    reader = zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True, closefd=False)
    try:
        return _parse(_Parser(reader))
    except (zstandard.ZstdError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{name}: not a valid index.json.zstd ({err})") from None


def _parse(parser: _Parser) -> FileList:
    builder: FileListBuilder | None = None
    source: Any = None
    parser.punct("{")
    if parser.peek() == "}":
        raise KeyError("files")
    while True:
        key = parser.value()
        parser.punct(":")
        if key == "files":
            # "source" comes first in every writer's index: its paths then share it as a prefix.
            builder = FileListBuilder(_prefix_of(source))
            parser.punct("[")
            if parser.peek() == "]":
                parser.punct("]")
            else:
                while True:
                    # A buffer's worth of entries at C speed; the one cut by the buffer's end alone.
                    entries = parser.values() or [parser.value()]
                    for entry in entries:
                        builder.add(str(entry["path"]), int(entry["size"]))
                    if parser.punct(",]") == "]":
                        break
        elif key == "source":
            source = parser.value()
        else:
            parser.value()
        if parser.punct(",}") == "}":
            break
    if builder is None:
        raise KeyError("files")
    return builder.build()


def _prefix_of(source: Any) -> str:
    """What the paths of a listing of ``source`` start with (known when ``source`` comes first)."""
    if not isinstance(source, str) or not source:
        return ""
    return source if source.endswith("/") else source + "/"
