"""litdata-format: the bytes of a LitData dataset, with no torch at import.

Chunks and ``index.json`` (byte-compatible with upstream LitData 0.2.x), the pytree spec,
serializers, item loaders, compression, encryption and MosaicML MDS reading. See FORMAT.md.
"""

from litdata_format._atomic import atomic_file, temp_target, write_file_atomic
from litdata_format._checksum import ChecksumError, checksum_file, expected_checksum, verify_file
from litdata_format._chunk import Chunk, ChunkView, encode_chunk
from litdata_format._compression import compress, decompress
from litdata_format._encryption import Encryption, FernetEncryption, RSAEncryption
from litdata_format._index import (
    ChunkInfo,
    DatasetIndex,
    IndexNotFoundError,
    complete_dataset,
    is_complete_dataset,
    load_index,
    parse_index,
    write_json_atomic,
)
from litdata_format._json_leaf import JsonLeaf
from litdata_format._keys import KEYS_FILE, keys_parquet, normalize_key, read_keys
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
from litdata_format._reader import DatasetReader, cached_chunk_sizes, open_chunk, plain_chunk_name
from litdata_format._registry import default_serializers, resolve_serializers
from litdata_format._serializers import Serializer
from litdata_format._sizes import parse_size
from litdata_format._trust import PickleRefusedError, PickleWriteWarning
from litdata_format._writer import DEFAULT_CHUNK_BYTES, BinaryWriter

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_CHUNK_BYTES",
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
    "complete_dataset",
    "compress",
    "decompress",
    "default_serializers",
    "encode_chunk",
    "expected_checksum",
    "is_complete_dataset",
    "is_pyg_data",
    "keys_parquet",
    "load_index",
    "normalize_key",
    "open_chunk",
    "parse_index",
    "parse_size",
    "plain_chunk_name",
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
