"""Functions the end-to-end optimize/map tests hand to workers.

Spawned workers import them as ``tests.support.prep_e2e_fns``, so the repository root must be on
``sys.path`` in the parent (pytest does not put it there with ``--import-mode=importlib``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from litdata_format import Image  # noqa: E402


def random_images(index: int) -> dict[str, Any]:
    rng = np.random.default_rng(index)
    array = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    return {"index": index, "image": Image(array=array, quality=95, format="jpeg"), "class": int(rng.integers(10))}


def should_keep(index: int) -> bool:
    return index % 2 == 0


def keep_even(data: int) -> Any:
    if should_keep(data):
        yield data


def inverse(data: int) -> Any:
    try:
        yield 1 / data
    except ZeroDivisionError:
        return


def compress(index: int) -> tuple[int, int]:
    return index, index**2


def fn(index: Any) -> Any:
    return index


def value_fn(index: int) -> dict[str, int]:
    return {"index": index, "value": index**2}


def yield_numbers(n: int) -> Any:
    yield from ((i, i**2) for i in range(n))


def data_producer(q: Any, n: int) -> None:
    from litdata.processing.data_processor import ALL_DONE

    for item in yield_numbers(n):
        q.put(item)
    q.put(ALL_DONE)


class Tokenizer:
    """A stand-in tokenizer: one token per character."""

    def encode(self, text: str, bos: bool = False, eos: bool = True) -> np.ndarray:
        ids = [ord(c) % 1000 for c in text] + ([0] if eos else [])
        return np.asarray(ids, dtype=np.int32)


def tokenize_fn(filepath: str, tokenizer: Tokenizer | None = None) -> Any:
    import zstandard as zstd

    assert tokenizer is not None
    with zstd.open(open(filepath, "rb"), "rt", encoding="utf-8") as f:
        for row in f:
            record = json.loads(row)
            if record["meta"]["redpajama_set_name"] == "RedPajamaGithub":
                continue
            yield tokenizer.encode(record["text"], bos=False, eos=True)


def resize_image(image_path: str, output_dir: str) -> None:
    from PIL import Image as PILImage

    output_image_path = os.path.join(output_dir, os.path.basename(image_path))
    PILImage.open(image_path).resize((24, 24)).save(output_image_path)


def write_square(index: int, output_dir: str) -> None:
    Path(output_dir, f"{index}.txt").write_text(str(index**2))


def file_size(path: str) -> dict[str, Any]:
    return {"name": os.path.basename(path), "size": os.path.getsize(path), "local": os.path.exists(path)}


def named(index: int) -> dict[str, Any]:
    return {"name": f"item-{index}", "value": index * 3}


def named_failing_once(index: int) -> dict[str, Any]:
    """``named``, but input 29 fails the first time (a marker file named by an environment variable)."""
    marker = os.environ["LITDATA_TEST_FAIL_ONCE"]
    if index == 29 and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("failing once")
    return named(index)


def name_key(sample: dict[str, Any]) -> str:
    return sample["name"]


def value_key(sample: dict[str, Any]) -> int:
    return sample["value"]


def same_key(sample: Any) -> str:
    return "always"


def identity_key(sample: Any) -> Any:
    return sample


def bytes_and_mixed_list(index: int) -> dict[str, Any]:
    """A sample upstream 0.2.76 writes and reads: bytes, and a list of ints and floats (its length varies)."""
    return {"b": b"x" * (index + 1), "l": [index, 2.5] + [3] * (index % 3), "n": index}
