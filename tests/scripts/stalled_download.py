"""A process reading a whole S3 dataset into a shared cache, for tests/test_stalled_download.py.

Run as ``python -m tests.scripts.stalled_download '<json>'`` with the dataset URL, its ``storage_options``, the
cache folder and the number of samples; prints one JSON line: the indexes read and whether each
sample's payload is the one written for it.
"""

from __future__ import annotations

import json
import sys

from litdata_stream import StreamingDataset


def payload(index: int) -> bytes:
    """The bytes sample ``index`` holds (what the test writes)."""
    return bytes([index % 251]) * 40_000 + index.to_bytes(4, "little")


def main() -> None:
    args = json.loads(sys.argv[1])
    dataset = StreamingDataset(
        args["url"], cache_dir=args["cache"], storage_options=args["storage_options"], max_cache_size="1GB"
    )
    indexes: list[int] = []
    wrong: list[int] = []
    for sample in dataset:
        indexes.append(int(sample["index"]))
        if sample["data"] != payload(int(sample["index"])):
            wrong.append(int(sample["index"]))
    print(json.dumps({"indexes": indexes, "wrong": wrong}), flush=True)


if __name__ == "__main__":
    main()
