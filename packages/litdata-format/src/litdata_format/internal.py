"""Internal to the litdata packages: what litdata-io, -stream, -raw and -prep need from litdata-format.

Not the user API: these helpers change with the packages that use them, which pin litdata-format
exactly. For every litdata package, ``litdata_x`` exports what its users need, ``litdata_x.internal``
what the other litdata packages need beyond that; ``_underscore`` modules are its own and its tests'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_format._atomic import atomic_file as atomic_file
    from litdata_format._atomic import temp_target as temp_target
    from litdata_format._atomic import write_file_atomic as write_file_atomic
    from litdata_format._chunks._checksum import Checksum as Checksum
    from litdata_format._chunks._checksum import check_checksum_fields as check_checksum_fields
    from litdata_format._chunks._checksum import expected_checksum as expected_checksum
    from litdata_format._chunks._chunk import Chunk as Chunk
    from litdata_format._chunks._chunk import encode_chunk as encode_chunk
    from litdata_format._chunks._compression import compress as compress
    from litdata_format._chunks._compression import decompress as decompress
    from litdata_format._chunks._compression import decompress_file as decompress_file
    from litdata_format._chunks._layouts import open_chunk as open_chunk
    from litdata_format._chunks._layouts import open_listed_chunk as open_listed_chunk
    from litdata_format._environment import VARIABLES as VARIABLES
    from litdata_format._environment import read_choice as read_choice
    from litdata_format._environment import read_count as read_count
    from litdata_format._environment import read_flag as read_flag
    from litdata_format._environment import read_seconds as read_seconds
    from litdata_format._environment import read_size as read_size
    from litdata_format._environment import read_text as read_text
    from litdata_format._index._dataset_index import check_relative_path as check_relative_path
    from litdata_format._index._index_json import cached_chunk_sizes as cached_chunk_sizes
    from litdata_format._index._index_json import chunk_name as chunk_name
    from litdata_format._index._index_json import parse_chunk_name as parse_chunk_name
    from litdata_format._index._index_json import plain_chunk_name as plain_chunk_name
    from litdata_format._index._index_json import rank_index_name as rank_index_name
    from litdata_format._index._index_json import read_index_file as read_index_file
    from litdata_format._index._index_json import write_json_atomic as write_json_atomic
    from litdata_format._index._key_index import KEYS_FILE as KEYS_FILE
    from litdata_format._index._key_index import keys_parquet as keys_parquet
    from litdata_format._index._key_index import normalize_key as normalize_key
    from litdata_format._index._key_index import read_keys as read_keys
    from litdata_format._loaders._dataset_reader import loader_for as loader_for
    from litdata_format._loaders._gather import SmallChunkRows as SmallChunkRows
    from litdata_format._loaders._item_loaders import small_chunk_rows as small_chunk_rows
    from litdata_format._loaders._opener import ChunkOpener as ChunkOpener
    from litdata_format._loaders._sample_map import SampleMap as SampleMap
    from litdata_format._media._wrappers import is_pyg_data as is_pyg_data
    from litdata_format._notes import add_note as add_note
    from litdata_format._samples._pytree import tree_flatten as tree_flatten
    from litdata_format._samples._pytree import tree_unflatten as tree_unflatten
    from litdata_format._sizes import format_size as format_size
    from litdata_format._sizes import parse_size as parse_size
    from litdata_format._writer import WriterOptions as WriterOptions
    from litdata_format._writer import check_writer_options as check_writer_options

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
