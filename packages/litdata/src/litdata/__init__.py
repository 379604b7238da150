"""litdata: take training data from where it lives into PyTorch, fast and resumably.

A drop-in for upstream LitData. Names are re-exported lazily from the workspace packages, so
``import litdata`` stays cheap (no torch until a torch-backed name is used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

__version__ = "0.2.1000"

if TYPE_CHECKING:
    from litdata_format import Audio as Audio
    from litdata_format import File as File
    from litdata_format import Graph as Graph
    from litdata_format import Image as Image
    from litdata_format import Jpeg as Jpeg
    from litdata_format import JpegArray as JpegArray
    from litdata_format import Mesh as Mesh
    from litdata_format import Nifti as Nifti
    from litdata_format import Pdf as Pdf
    from litdata_format import Pil as Pil
    from litdata_format import Tensor as Tensor
    from litdata_format import Text as Text
    from litdata_format import Tiff as Tiff
    from litdata_format import TokensLoader as TokensLoader
    from litdata_format import Video as Video
    from litdata_format import complete_dataset as complete_dataset
    from litdata_format import is_complete_dataset as is_complete_dataset
    from litdata_prep import Machine as Machine
    from litdata_prep import build_keys_index as build_keys_index
    from litdata_prep import dataset_update as dataset_update
    from litdata_prep import map as map
    from litdata_prep import merge_datasets as merge_datasets
    from litdata_prep import optimize as optimize
    from litdata_prep import walk as walk
    from litdata_raw import StreamingRawDataset as StreamingRawDataset
    from litdata_stream import CombinedStreamingDataset as CombinedStreamingDataset
    from litdata_stream import ParallelStreamingDataset as ParallelStreamingDataset
    from litdata_stream import StreamingDataLoader as StreamingDataLoader
    from litdata_stream import StreamingDataset as StreamingDataset
    from litdata_stream import index_hf_dataset as index_hf_dataset
    from litdata_stream import index_parquet_dataset as index_parquet_dataset
    from litdata_stream import litdata_collate as litdata_collate
    from litdata_stream import train_test_split as train_test_split

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
