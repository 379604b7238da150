"""litdata-format: the bytes of a LitData dataset, with no torch at import.

Chunks and ``index.json`` (byte-compatible with upstream LitData 0.2.x), the pytree spec,
serializers, item loaders, compression, encryption and MosaicML MDS reading. See FORMAT.md.
This module is the user API (the other litdata packages' extras are in :mod:`litdata_format.internal`);
names load their module on first use, so a process needing only the file helpers skips numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

__version__ = "0.2.1000"

if TYPE_CHECKING:
    from litdata_format._chunks._checksum import ChecksumError as ChecksumError
    from litdata_format._chunks._checksum import checksum_file as checksum_file
    from litdata_format._chunks._checksum import verify_file as verify_file
    from litdata_format._chunks._encryption import Encryption as Encryption
    from litdata_format._chunks._encryption import FernetEncryption as FernetEncryption
    from litdata_format._chunks._encryption import RSAEncryption as RSAEncryption
    from litdata_format._index._dataset_index import INDEX_FILENAME as INDEX_FILENAME
    from litdata_format._index._dataset_index import ChunkInfo as ChunkInfo
    from litdata_format._index._dataset_index import DatasetIndex as DatasetIndex
    from litdata_format._index._index_json import IndexNotFoundError as IndexNotFoundError
    from litdata_format._index._index_json import complete_dataset as complete_dataset
    from litdata_format._index._index_json import is_complete_dataset as is_complete_dataset
    from litdata_format._index._index_json import layout_differences as layout_differences
    from litdata_format._index._index_json import load_index as load_index
    from litdata_format._index._index_json import merge_indexes as merge_indexes
    from litdata_format._index._index_json import parse_index as parse_index
    from litdata_format._loaders._dataset_reader import DatasetReader as DatasetReader
    from litdata_format._loaders._item_loaders import BaseItemLoader as BaseItemLoader
    from litdata_format._loaders._item_loaders import PyTreeLoader as PyTreeLoader
    from litdata_format._loaders._item_loaders import TokensLoader as TokensLoader
    from litdata_format._loaders._parquet import ParquetLoader as ParquetLoader
    from litdata_format._media._wrappers import Audio as Audio
    from litdata_format._media._wrappers import File as File
    from litdata_format._media._wrappers import Graph as Graph
    from litdata_format._media._wrappers import Image as Image
    from litdata_format._media._wrappers import Jpeg as Jpeg
    from litdata_format._media._wrappers import JpegArray as JpegArray
    from litdata_format._media._wrappers import Mesh as Mesh
    from litdata_format._media._wrappers import Nifti as Nifti
    from litdata_format._media._wrappers import Pdf as Pdf
    from litdata_format._media._wrappers import Pil as Pil
    from litdata_format._media._wrappers import Tensor as Tensor
    from litdata_format._media._wrappers import Text as Text
    from litdata_format._media._wrappers import Tiff as Tiff
    from litdata_format._media._wrappers import Video as Video
    from litdata_format._samples._json_leaf import JsonLeaf as JsonLeaf
    from litdata_format._samples._pytree import register_namedtuple as register_namedtuple
    from litdata_format._samples._serializers import Serializer as Serializer
    from litdata_format._samples._trust import PickleRefusedError as PickleRefusedError
    from litdata_format._samples._trust import PickleWriteWarning as PickleWriteWarning
    from litdata_format._writer import DEFAULT_CHUNK_BYTES as DEFAULT_CHUNK_BYTES
    from litdata_format._writer import BinaryWriter as BinaryWriter

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
