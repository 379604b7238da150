"""Pin litdata_raw's public API: a change here is a change users see (update the list on purpose)."""

from __future__ import annotations

import litdata_raw


def test_all_is_pinned() -> None:
    assert sorted(litdata_raw.__all__) == [
        "BaseIndexer",
        "FileIndexer",
        "FileMetadata",
        "StreamingRawDataset",
        "__version__",
    ]
    for name in litdata_raw.__all__:
        assert getattr(litdata_raw, name) is not None
