"""Functions upstream's doc examples hand to optimize / map workers, with the docs' bodies.

Workers import them as ``tests.support.doc_example_fns`` (spawned ones need the repository root on
``sys.path``, which ``tests.support.prep_e2e_fns`` puts there).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import litdata as ld
from tests.support.prep_e2e_fns import ROOT  # noqa: F401 (puts the repository root on sys.path)


def load_image(path: str) -> dict[str, Any]:
    return {"image": ld.Image(path=path, quality=95, format="jpeg"), "id": path}


def load_image_as_is(path: str) -> dict[str, Any]:
    return {"image": ld.Image(path=path), "id": path}


def process(pq_file: Any, output_dir: str) -> None:
    # pq_file is a pyarrow.parquet.ParquetFile
    with open(os.path.join(output_dir, f"{uuid.uuid4().hex}.rows"), "w") as f:
        f.write(str(pq_file.metadata.num_rows))


def tokenize_fn(filepath: str, tokenizer: Any = None) -> Any:
    """The docs' parquet tokenizer; ``batch.to_pandas()["content"]`` reads the column with pyarrow's
    ``to_pylist()`` instead, as pandas is not installed here (it is the user's code, not LitData's)."""
    import pyarrow.parquet as pq

    parquet_file = pq.ParquetFile(filepath)
    # Process per batch to reduce RAM usage
    for batch in parquet_file.iter_batches(batch_size=8192, columns=["content"]):
        for text in batch.column("content").to_pylist():
            yield tokenizer.encode(text, bos=False, eos=True)
