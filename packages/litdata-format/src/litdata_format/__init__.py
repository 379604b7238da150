"""litdata-format: the bytes of a LitData dataset, with no torch at import.

Chunks and ``index.json`` (byte-compatible with upstream LitData 0.2.x), the pytree spec,
serializers, item loaders, compression, encryption and MosaicML MDS reading. See FORMAT.md.
Names load their module on first use, so a process that needs only the file helpers (the obstore
helper process, an optimize worker writing locally) does not import numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

# public name -> the submodule defining it (loaded on first use: PEP 562)
_EXPORTS: dict[str, str] = {
    "atomic_file": "litdata_format._atomic",
    "temp_target": "litdata_format._atomic",
    "write_file_atomic": "litdata_format._atomic",
    "Checksum": "litdata_format._checksum",
    "ChecksumError": "litdata_format._checksum",
    "checksum_file": "litdata_format._checksum",
    "expected_checksum": "litdata_format._checksum",
    "verify_file": "litdata_format._checksum",
    "Chunk": "litdata_format._chunk",
    "ChunkView": "litdata_format._chunk",
    "encode_chunk": "litdata_format._chunk",
    "compress": "litdata_format._compression",
    "decompress": "litdata_format._compression",
    "INDEX_FILENAME": "litdata_format._dataset_index",
    "ChunkInfo": "litdata_format._dataset_index",
    "DatasetIndex": "litdata_format._dataset_index",
    "Encryption": "litdata_format._encryption",
    "FernetEncryption": "litdata_format._encryption",
    "RSAEncryption": "litdata_format._encryption",
    "IndexNotFoundError": "litdata_format._index",
    "cached_chunk_sizes": "litdata_format._index",
    "chunk_name": "litdata_format._index",
    "complete_dataset": "litdata_format._index",
    "is_complete_dataset": "litdata_format._index",
    "layout_differences": "litdata_format._index",
    "load_index": "litdata_format._index",
    "merge_indexes": "litdata_format._index",
    "parse_chunk_name": "litdata_format._index",
    "parse_index": "litdata_format._index",
    "plain_chunk_name": "litdata_format._index",
    "rank_index_name": "litdata_format._index",
    "write_json_atomic": "litdata_format._index",
    "JsonLeaf": "litdata_format._json_leaf",
    "KEYS_FILE": "litdata_format._keys",
    "keys_parquet": "litdata_format._keys",
    "normalize_key": "litdata_format._keys",
    "read_keys": "litdata_format._keys",
    "open_chunk": "litdata_format._layouts",
    "BaseItemLoader": "litdata_format._loaders",
    "PyTreeLoader": "litdata_format._loaders",
    "TokensLoader": "litdata_format._loaders",
    "Audio": "litdata_format._media",
    "File": "litdata_format._media",
    "Graph": "litdata_format._media",
    "Image": "litdata_format._media",
    "Jpeg": "litdata_format._media",
    "JpegArray": "litdata_format._media",
    "Mesh": "litdata_format._media",
    "Nifti": "litdata_format._media",
    "Pdf": "litdata_format._media",
    "Pil": "litdata_format._media",
    "Tensor": "litdata_format._media",
    "Text": "litdata_format._media",
    "Tiff": "litdata_format._media",
    "Video": "litdata_format._media",
    "is_pyg_data": "litdata_format._media",
    "ParquetLoader": "litdata_format._parquet",
    "TreeSpec": "litdata_format._pytree",
    "register_namedtuple": "litdata_format._pytree",
    "tree_flatten": "litdata_format._pytree",
    "tree_unflatten": "litdata_format._pytree",
    "DatasetReader": "litdata_format._reader",
    "default_serializers": "litdata_format._registry",
    "resolve_serializers": "litdata_format._registry",
    "Serializer": "litdata_format._serializers",
    "parse_size": "litdata_format._sizes",
    "PickleRefusedError": "litdata_format._trust",
    "PickleWriteWarning": "litdata_format._trust",
    "DEFAULT_CHUNK_BYTES": "litdata_format._writer",
    "BinaryWriter": "litdata_format._writer",
}

if TYPE_CHECKING:
    from litdata_format._atomic import atomic_file, temp_target, write_file_atomic
    from litdata_format._checksum import Checksum, ChecksumError, checksum_file, expected_checksum, verify_file
    from litdata_format._chunk import Chunk, ChunkView, encode_chunk
    from litdata_format._compression import compress, decompress
    from litdata_format._dataset_index import INDEX_FILENAME, ChunkInfo, DatasetIndex
    from litdata_format._encryption import Encryption, FernetEncryption, RSAEncryption
    from litdata_format._index import (
        IndexNotFoundError,
        cached_chunk_sizes,
        chunk_name,
        complete_dataset,
        is_complete_dataset,
        layout_differences,
        load_index,
        merge_indexes,
        parse_chunk_name,
        parse_index,
        plain_chunk_name,
        rank_index_name,
        write_json_atomic,
    )
    from litdata_format._json_leaf import JsonLeaf
    from litdata_format._keys import KEYS_FILE, keys_parquet, normalize_key, read_keys
    from litdata_format._layouts import open_chunk
    from litdata_format._loaders import BaseItemLoader, PyTreeLoader, TokensLoader
    from litdata_format._media import (
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
        Video,
        is_pyg_data,
    )
    from litdata_format._parquet import ParquetLoader
    from litdata_format._pytree import TreeSpec, register_namedtuple, tree_flatten, tree_unflatten
    from litdata_format._reader import DatasetReader
    from litdata_format._registry import default_serializers, resolve_serializers
    from litdata_format._serializers import Serializer
    from litdata_format._sizes import parse_size
    from litdata_format._trust import PickleRefusedError, PickleWriteWarning
    from litdata_format._writer import DEFAULT_CHUNK_BYTES, BinaryWriter

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "INDEX_FILENAME",
    "Audio",
    "Encryption",
    "FernetEncryption",
    "File",
    "IndexNotFoundError",
    "KEYS_FILE",
    "Graph",
    "Image",
    "Jpeg",
    "JpegArray",
    "JsonLeaf",
    "Mesh",
    "Nifti",
    "Pdf",
    "Pil",
    "RSAEncryption",
    "Tensor",
    "Text",
    "Tiff",
    "Video",
    "BaseItemLoader",
    "BinaryWriter",
    "Checksum",
    "ChecksumError",
    "Chunk",
    "ChunkInfo",
    "ChunkView",
    "DatasetIndex",
    "DatasetReader",
    "ParquetLoader",
    "PickleRefusedError",
    "PickleWriteWarning",
    "PyTreeLoader",
    "Serializer",
    "TokensLoader",
    "TreeSpec",
    "__version__",
    "atomic_file",
    "cached_chunk_sizes",
    "checksum_file",
    "chunk_name",
    "complete_dataset",
    "compress",
    "decompress",
    "default_serializers",
    "encode_chunk",
    "expected_checksum",
    "is_complete_dataset",
    "is_pyg_data",
    "keys_parquet",
    "layout_differences",
    "load_index",
    "merge_indexes",
    "normalize_key",
    "open_chunk",
    "parse_chunk_name",
    "parse_index",
    "parse_size",
    "plain_chunk_name",
    "rank_index_name",
    "read_keys",
    "register_namedtuple",
    "resolve_serializers",
    "temp_target",
    "tree_flatten",
    "tree_unflatten",
    "verify_file",
    "write_file_atomic",
    "write_json_atomic",
]

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)
