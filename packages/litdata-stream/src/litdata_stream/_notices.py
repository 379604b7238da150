"""What a new dataset logs about its setup, in upstream LitData's words and under its logger's name."""

from __future__ import annotations

import logging
from typing import Any

from litdata_format.internal import parse_size

__all__ = ["notice_new_world", "notice_setup"]

# Upstream LitData's logger name, so logging set up for upstream (levels, filters, handlers) applies.
logger = logging.getLogger("litdata.streaming.dataset")
_SMALL_CACHE_BYTES = 25 * 10**9


def notice_setup(drop_last: bool, world_size: int, max_cache_size: Any) -> None:
    """Log what upstream logs when a dataset is made: ``drop_last=False`` on several ranks, a small cache cap."""
    _notice_drop_last(drop_last, world_size)
    _notice_small_cache(max_cache_size)


def notice_new_world(kind: str, before: int, world_size: int, rank: int, drop_last: bool) -> None:
    """Log that a dataset made in another world (e.g. before a Trainer started its processes) splits its epochs anew."""
    logger.info(
        "%s was made in a world of %d process(es) and is now read by rank %d of %d: its epochs are split over "
        "%d (drop_last=%s)",
        kind, before, rank, world_size, world_size, drop_last,
    )  # fmt: skip
    _notice_drop_last(drop_last, world_size)


def _notice_drop_last(drop_last: bool, world_size: int) -> None:
    if not drop_last and world_size > 1:
        # A log record, as upstream (its words first): a configuration to know about, not a mistake.
        logger.warning(
            "You're operating within a distributed environment and have disabled the `drop_last` option. "
            "Please note that this configuration may lead to training interruptions if your system depends "
            "on distributed collectives. (Ranks may get different numbers of batches, and a collective "
            "operation in the training step can then hang; prefer drop_last=True.)"
        )


def _notice_small_cache(max_cache_size: Any) -> None:
    """Log, as upstream does, when a fixed ``max_cache_size`` is under 25 GB (fractions and None are not checked)."""
    if isinstance(max_cache_size, bool) or not isinstance(max_cache_size, (int, str)):
        return
    if isinstance(max_cache_size, str) and "." in max_cache_size:
        try:
            float(max_cache_size)  # "0.9": a fraction of the free space
            return
        except ValueError:
            pass  # "1.5GB": a size
    try:
        size = parse_size(max_cache_size, name="max_cache_size")
    except (TypeError, ValueError):
        return  # the cache reports a malformed value when it opens, naming it
    if size < _SMALL_CACHE_BYTES:
        logger.warning(
            "The provided `max_cache_size` is less than 25GB. It is %s bytes: with several DataLoader workers "
            "each holding the chunk being read and `max_pre_download` chunks ahead, a small cache evicts chunks "
            "that are read again soon (and waits for room); consider at least 25GB, or a fraction such as 0.5 of "
            "the free disk.",
            f"{size:,}",
        )
