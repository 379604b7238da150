"""Pin the public API: adding or removing a name is a deliberate change to this list."""

from __future__ import annotations

import litdata_format

EXPECTED = {
    "DEFAULT_CHUNK_BYTES",
    "Audio",
    "Encryption",
    "FernetEncryption",
    "File",
    "IndexNotFoundError",
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
    "load_index",
    "open_chunk",
    "parse_index",
    "parse_size",
    "plain_chunk_name",
    "register_namedtuple",
    "resolve_serializers",
    "temp_target",
    "tree_flatten",
    "tree_unflatten",
    "verify_file",
    "write_file_atomic",
    "write_json_atomic",
}


def test_all_is_pinned() -> None:
    assert set(litdata_format.__all__) == EXPECTED
    for name in litdata_format.__all__:
        assert hasattr(litdata_format, name), name
