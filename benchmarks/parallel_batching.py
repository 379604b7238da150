"""What batching a ParallelStreamingDataset in the workers gains: ours, this checkout only.

Not a row of the suite: a before/after measure of one change. Two local datasets of small
fixed-size samples are read side by side by a ParallelStreamingDataset, through a
StreamingDataLoader (the tuples batched in the dataset, each sub-dataset's share of a batch
gathered as arrays) and through a plain torch DataLoader with the same collate (torch batching
the tuples sample by sample: what the StreamingDataLoader did before). Each round runs both, in
alternating order; the report is the median rate of each and the median of the per-round ratios
(the machine is shared, so only ratios measured side by side mean anything).

    uv run python -m benchmarks.parallel_batching --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _write(folder: Path, samples: int, offset: int) -> None:
    from litdata_format import BinaryWriter

    writer = BinaryWriter(folder, chunk_bytes="4MB")
    for i in range(samples):
        writer.add_item(i, {"index": offset + i, "data": np.full(64, i % 251, dtype=np.uint8)})
    writer.done()
    writer.merge()


def _rate(loader: Any) -> float:
    start, count = time.perf_counter(), 0
    for batch in loader:
        count += len(batch[0]["index"])
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import torch

    from litdata_stream import ParallelStreamingDataset, StreamingDataLoader, StreamingDataset, litdata_collate

    with tempfile.TemporaryDirectory() as tmp:
        dirs = [Path(tmp) / "a", Path(tmp) / "b"]
        for offset, folder in enumerate(dirs):
            _write(folder, args.samples, offset * args.samples)

        def dataset() -> ParallelStreamingDataset:
            return ParallelStreamingDataset([StreamingDataset(str(d), shuffle=True) for d in dirs])

        for workers in (0, 2):
            ours: list[float] = []
            torchs: list[float] = []
            for round_ in range(args.rounds):
                for kind in ("ours", "torch") if round_ % 2 == 0 else ("torch", "ours"):
                    if kind == "ours":
                        loader: Any = StreamingDataLoader(dataset(), batch_size=args.batch_size, num_workers=workers)
                        ours.append(_rate(loader))
                    else:
                        plain = dataset()
                        plain.set_batch_size(args.batch_size)
                        plain.set_num_workers(workers)
                        loader = torch.utils.data.DataLoader(
                            plain, batch_size=args.batch_size, num_workers=workers, collate_fn=litdata_collate
                        )
                        torchs.append(_rate(loader))
            ratio = statistics.median(a / b for a, b in zip(ours, torchs))
            print(
                f"num_workers={workers}: batched in the workers {statistics.median(ours):,.0f} tuples/s, "
                f"torch per sample {statistics.median(torchs):,.0f} tuples/s, ratio {ratio:.2f}x"
            )


if __name__ == "__main__":
    main()
