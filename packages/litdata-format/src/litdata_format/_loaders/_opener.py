"""The chunk opener: chunk N opened once, its item count checked, a few kept open, closed when done.

Every reader of chunks (``DatasetReader``, the streaming sources over local disk and over the
chunk cache) opens them through one :class:`ChunkOpener`. What differs between them is how a
chunk's file is found and opened (in place, after verifying it, or once the cache has it pinned)
and what happens when it is closed (the cache unpins it): the two callables it is given.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from litdata_format._chunks._chunk import Chunk

__all__ = ["ChunkOpener"]


class ChunkOpener:
    """Opens chunks by number, checks each holds what the index says, keeps the latest ``keep_open`` open.

    Args:
        names: each chunk's file name, for messages.
        counts: how many items each chunk holds, as the index says (``chunk_size``).
        open_file: opens chunk ``number`` (finding its file, mapping or reading it).
        keep_open: how many chunks stay open at once (the least recently used is closed past it);
            None: all of them, until :meth:`close`.
        on_close: called with ``(number, consumed)`` after chunk ``number`` was closed (also when
            opening it failed its check); ``consumed`` is True when :meth:`release` closed it.
    """

    def __init__(
        self,
        names: Callable[[int], str],
        counts: np.ndarray,
        open_file: Callable[[int], Chunk],
        keep_open: int | None = 16,
        on_close: Callable[[int, bool], None] | None = None,
    ) -> None:
        if keep_open is not None and keep_open < 1:
            raise ValueError(f"keep_open must be at least 1 (or None), got {keep_open}")
        self._names = names
        self._counts = counts
        self._open_file = open_file
        self._keep_open = keep_open
        self._on_close = on_close
        self._open: dict[int, Chunk] = {}  # least recently used first

    def chunk(self, number: int) -> Chunk:
        """Chunk ``number``, opened on first use (it becomes the most recently used).

        Raises:
            ValueError: the chunk holds another number of items than the index says (the
                message names the file and both counts).
        """
        opened = self._open.pop(number, None)
        if opened is None:
            opened = self._open_file(number)
            expected = int(self._counts[number])
            if len(opened) != expected:
                found = len(opened)
                self._shut(number, opened, consumed=False)
                raise ValueError(
                    f"chunk {opened.name}: holds {found} items but index.json says {expected} "
                    f"({self._names(number)}); the file does not belong to this index: restore it or rewrite the "
                    "dataset"
                )
        self._open[number] = opened
        keep = self._keep_open
        if keep is not None and len(self._open) > keep:
            oldest = next(iter(self._open))
            self._shut(oldest, self._open.pop(oldest), consumed=False)
        return opened

    @property
    def open_numbers(self) -> tuple[int, ...]:
        """The numbers of the chunks open now, least recently used first."""
        return tuple(self._open)

    def is_open(self, number: int) -> bool:
        """Whether chunk ``number`` is open now."""
        return number in self._open

    def release(self, number: int) -> None:
        """The reader is done with chunk ``number``: close it now (a no-op when it is not open)."""
        opened = self._open.pop(number, None)
        if opened is not None:
            self._shut(number, opened, consumed=True)

    def close(self) -> None:
        """Close every chunk still open."""
        while self._open:
            number = next(iter(self._open))
            self._shut(number, self._open.pop(number), consumed=False)

    def _shut(self, number: int, opened: Chunk, consumed: bool) -> None:
        try:
            opened.close()  # a no-op for the buffer while a sample still views it; the GC unmaps it later
        finally:
            if self._on_close is not None:
                self._on_close(number, consumed)
