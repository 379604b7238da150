"""Datasets the stream tests hand to spawned workers (importable by name: see ``conftest.py``)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from litdata_stream import StreamingDataset

# A tracked object made when this module is imported: before the first sample in every worker
# (fork: in the parent; spawn: while the dataset is unpickled).
MADE_AT_IMPORT: list[str] = ["made at import"]


class CollectorView(StreamingDataset):
    """Each sample says what the worker's garbage collector walks, and whether a cycle it made was collected."""

    def __getitem__(self, index: Any) -> Any:
        sample = super().__getitem__(index)

        class Node:
            pass

        node = Node()
        node.self = node  # pyright: ignore[reportAttributeAccessIssue]
        ref = weakref.ref(node)
        del node
        gc.collect()
        return {
            "index": sample["index"],
            "frozen": gc.get_freeze_count(),
            "walks_import": int(any(o is MADE_AT_IMPORT for o in gc.get_objects())),
            "cycle_collected": int(ref() is None),
        }
