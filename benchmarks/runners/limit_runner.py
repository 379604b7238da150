"""The physical limits the workloads are measured against (run with the workspace's python).

* ``page-cache``: read every file of a folder into a reused buffer after a warm-up pass, so the
  bytes come from the page cache: the most any reader of those files can get on this machine.
* ``s3-server``: GET every object under a prefix from the local S3-compatible server with boto3,
  several requests in flight: what the server can hand out, to tell a slow reader from a slow server.
* ``machine-noise``: the same fixed work in every run (gather workload 1's records in shuffled
  batches of 256 and pickle each batch there and back, a few passes, in one process): how much this machine's
  speed varies between fresh processes, the floor under any run-to-run spread a workload shows.
"""

from __future__ import annotations

import os
import pickle
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _common import main

_BUFFER = 8 << 20


def _files(folder: str) -> list[str]:
    found = []
    for root, _, names in os.walk(folder):
        found.extend(os.path.join(root, name) for name in names)
    return sorted(found)


def _read_all(paths: list[str], buffer: bytearray) -> int:
    view = memoryview(buffer)
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while True:
                n = handle.readinto(view)
                if not n:
                    break
                total += n
    return total


def page_cache(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    paths = _files(params["dir"])
    buffer = bytearray(_BUFFER)
    _read_all(paths, buffer)  # warm the page cache
    started = time.perf_counter()
    size = _read_all(paths, buffer)
    elapsed = time.perf_counter() - started
    return {"items": len(paths), "bytes": size, "elapsed_s": elapsed}


def s3_server(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    import boto3

    s3 = params["s3"]
    client = boto3.client(
        "s3",
        endpoint_url=s3["endpoint"],
        aws_access_key_id=s3["key"],
        aws_secret_access_key=s3["secret"],
        region_name=s3["region"],
    )
    bucket, _, prefix = s3["url"].removeprefix("s3://").partition("/")
    keys = [obj["Key"] for obj in client.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")["Contents"]]

    def get(key: str) -> int:
        return len(client.get_object(Bucket=bucket, Key=key)["Body"].read())

    started = time.perf_counter()
    with ThreadPoolExecutor(params["threads"]) as pool:
        size = sum(pool.map(get, keys))
    elapsed = time.perf_counter() - started
    return {"items": len(keys), "bytes": size, "elapsed_s": elapsed, "s3_client": "boto3 get_object"}


def machine_noise(lib: str, params: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    rows = rng.integers(0, 256, size=(params["records"], params["record_bytes"]), dtype=np.uint8)
    order = rng.permutation(len(rows))
    batch = params["batch"]
    started = time.perf_counter()
    total = 0
    for start in list(range(0, len(order), batch)) * params["passes"]:
        gathered = rows[np.sort(order[start : start + batch])]
        total += len(pickle.loads(pickle.dumps(gathered, protocol=4)))
    elapsed = time.perf_counter() - started
    return {"items": total, "bytes": rows.nbytes, "elapsed_s": elapsed}


WORKLOADS = {"page-cache": page_cache, "s3-server": s3_server, "machine-noise": machine_noise}

if __name__ == "__main__":
    main(WORKLOADS)
