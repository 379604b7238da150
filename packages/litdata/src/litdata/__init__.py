"""litdata: take training data from where it lives into PyTorch, fast and resumably.

A drop-in for upstream LitData. Names are re-exported lazily from the workspace packages, so
``import litdata`` stays cheap (no torch until a torch-backed name is used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that owns the one real object
_EXPORTS: dict[str, str] = {
    "StreamingDataset": "litdata_stream",
    "StreamingDataLoader": "litdata_stream",
    "CombinedStreamingDataset": "litdata_stream",
    "ParallelStreamingDataset": "litdata_stream",
    "StreamingRawDataset": "litdata_raw",
    "litdata_collate": "litdata_stream",
    "train_test_split": "litdata_stream",
    "index_parquet_dataset": "litdata_stream",
    "index_hf_dataset": "litdata_stream",
    "TokensLoader": "litdata_format",
    "Audio": "litdata_format",
    "File": "litdata_format",
    "Graph": "litdata_format",
    "Image": "litdata_format",
    "Jpeg": "litdata_format",
    "JpegArray": "litdata_format",
    "Mesh": "litdata_format",
    "Nifti": "litdata_format",
    "Pdf": "litdata_format",
    "Pil": "litdata_format",
    "Tensor": "litdata_format",
    "Text": "litdata_format",
    "Tiff": "litdata_format",
    "Video": "litdata_format",
    "complete_dataset": "litdata_format",
    "is_complete_dataset": "litdata_format",
    "optimize": "litdata_prep",
    "map": "litdata_prep",
    "merge_datasets": "litdata_prep",
    "build_keys_index": "litdata_prep",
    "dataset_update": "litdata_prep",
    "walk": "litdata_prep",
}

if TYPE_CHECKING:
    from litdata_format import (
        Audio,
        File,
        Graph,
        Image,
        Jpeg,
        JpegArray,
        Mesh,
        Nifti,
        Pdf,
        Pil,
        Tensor,
        Text,
        Tiff,
        TokensLoader,
        Video,
        complete_dataset,
        is_complete_dataset,
    )
    from litdata_prep import build_keys_index, dataset_update, map, merge_datasets, optimize, walk
    from litdata_raw import StreamingRawDataset
    from litdata_stream import (
        CombinedStreamingDataset,
        ParallelStreamingDataset,
        StreamingDataLoader,
        StreamingDataset,
        index_hf_dataset,
        index_parquet_dataset,
        litdata_collate,
        train_test_split,
    )

__all__ = [
    "Audio",
    "File",
    "Graph",
    "Image",
    "Jpeg",
    "JpegArray",
    "Mesh",
    "Nifti",
    "Pdf",
    "Pil",
    "Tensor",
    "Text",
    "Tiff",
    "Video",
    "CombinedStreamingDataset",
    "ParallelStreamingDataset",
    "StreamingDataLoader",
    "StreamingDataset",
    "StreamingRawDataset",
    "TokensLoader",
    "__version__",
    "build_keys_index",
    "complete_dataset",
    "dataset_update",
    "index_hf_dataset",
    "index_parquet_dataset",
    "is_complete_dataset",
    "litdata_collate",
    "map",
    "merge_datasets",
    "optimize",
    "walk",
    "train_test_split",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'litdata' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
