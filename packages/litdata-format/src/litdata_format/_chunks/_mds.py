"""Reading MosaicML Streaming (MDS) datasets in place (FORMAT.md, "Reading MosaicML MDS datasets").

An MDS ``index.json`` lists ``shards``; :func:`parse_mds_index` maps each to a chunk of an ordinary
``DatasetIndex`` whose config says ``"format": "mds"``. A shard's offsets table is followed by a
JSON copy of its settings, so shards are opened by :func:`open_mds_shard` (which also undoes
MDS's whole-shard compression), and :class:`MdsSampleDecoder` decodes the values MDS's reader returns.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Mapping
from decimal import Decimal
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np

from litdata_format._chunks._chunk import StoredChunk, map_file
from litdata_format._guards import is_any_list, is_str_dict
from litdata_format._index._dataset_index import ChunkInfo, DatasetIndex, check_chunk_filename
from litdata_format._optional import import_optional
from litdata_format._samples._pytree import LEAF, TreeSpec
from litdata_format._samples._serializers import Buffer

__all__ = [
    "MDS_FORMAT",
    "MdsSampleDecoder",
    "MdsShard",
    "is_mds_index",
    "mds_decompress",
    "mds_decoder",
    "open_mds_shard",
    "parse_mds_index",
]

MDS_FORMAT = "mds"
_MDS_VERSION = 2

Decoder = Callable[[memoryview], Any]

# -- the index ------------------------------------------------------------------------------


def is_mds_index(index: DatasetIndex) -> bool:
    """True when ``index`` was adapted from an MDS ``index.json``."""
    return index.config.get("format") == MDS_FORMAT


def _shard_path(name: Any, source: str) -> str:
    # MDS's merge_index writes "<subdir>/<basename>"; allow plain relative paths, nothing else.
    if not isinstance(name, str) or not name:
        raise ValueError(f"{source}: a shard's basename must be a non-empty string, got {name!r}")
    for part in name.split("/"):
        check_chunk_filename(part, source)
    return name


def _file_info(shard: Mapping[str, Any], key: str, where: str) -> tuple[str, int]:
    info = shard.get(key)
    if not is_str_dict(info):
        raise ValueError(f"{where}: {key!r} must be an object with 'basename' and 'bytes', got {info!r:.100}")
    size = info.get("bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"{where}: {key}.bytes must be a non-negative int, got {size!r}")
    return _shard_path(info.get("basename"), where), size


def _string_list(shard: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = shard.get(key)
    if not is_any_list(value) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: {key!r} must be a list of strings, got {value!r:.200}")
    return value


def _check_sizes(sizes: Any, encodings: list[str], where: str) -> list[int | None]:
    if not is_any_list(sizes) or len(sizes) != len(encodings):
        raise ValueError(f"{where}: 'column_sizes' must list one size (or null) per column, got {sizes!r:.200}")
    for size, encoding in zip(sizes, encodings):
        expected = _spec(encoding, where).size
        if size != expected:
            raise ValueError(
                f"{where}: column encoding {encoding!r} takes {expected if expected else 'a variable number of'} "
                f"bytes but column_sizes says {size!r}; the index is corrupt"
            )
    return sizes


def parse_mds_index(obj: Mapping[str, Any], source: str) -> DatasetIndex:
    """Map a MosaicML MDS ``index.json`` (``{"shards": [...], "version": 2}``) to a DatasetIndex.

    Every shard becomes one chunk: ``filename`` is the file the shard is stored as (the
    compressed file when the shard is compressed), ``chunk_bytes`` the shard's uncompressed
    size and ``chunk_size`` its sample count. All shards must have the same columns.
    """
    shards = obj.get("shards")
    if not is_any_list(shards):
        raise ValueError(f"{source}: an MDS index needs a 'shards' list, got {type(shards).__name__}")
    chunks: list[ChunkInfo] = []
    names: list[str] = []
    encodings: list[str] = []
    sizes: list[int | None] = []
    for number, shard in enumerate(shards):
        where = f"{source}: shard {number}"
        if not is_str_dict(shard):
            raise ValueError(f"{where}: must be an object, got {shard!r:.100}")
        if shard.get("format") != MDS_FORMAT:
            raise ValueError(
                f"{where}: is a {shard.get('format')!r} shard; only MosaicML MDS shards ('mds') can be read"
            )
        if shard.get("version") != _MDS_VERSION:
            raise ValueError(f"{where}: MDS shard version {shard.get('version')!r} is not supported (only 2)")
        shard_names = _string_list(shard, "column_names", where)
        shard_encodings = _string_list(shard, "column_encodings", where)
        if len(shard_names) != len(shard_encodings) or len(set(shard_names)) != len(shard_names):
            raise ValueError(f"{where}: column_names and column_encodings must pair up one to one, without repeats")
        shard_sizes = _check_sizes(shard.get("column_sizes"), shard_encodings, where)
        if number == 0:
            names, encodings, sizes = shard_names, shard_encodings, shard_sizes
        elif (shard_names, shard_encodings) != (names, encodings):
            raise ValueError(
                f"{where}: has columns {dict(zip(shard_names, shard_encodings))} but shard 0 has "
                f"{dict(zip(names, encodings))}; all shards of a dataset must share their columns"
            )
        samples = shard.get("samples")
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 0:
            raise ValueError(f"{where}: 'samples' must be a non-negative int, got {samples!r}")
        raw_name, raw_bytes = _file_info(shard, "raw_data", where)
        compression = shard.get("compression")
        filename = raw_name
        if compression is not None or shard.get("zip_data") is not None:
            _compression_family(compression, where)
            filename, _ = _file_info(shard, "zip_data", where)
        chunks.append(
            ChunkInfo(
                filename=filename,
                chunk_bytes=raw_bytes,
                chunk_size=samples,
                dim=None,
                extra={"column_sizes": list(shard_sizes), "compression": compression, "raw_filename": raw_name},
            )
        )
    spec = TreeSpec("builtins.dict", list(names), tuple(LEAF for _ in names))
    config: dict[str, Any] = {
        "format": MDS_FORMAT,
        "compression": chunks[0].extra["compression"] if chunks else None,
        "chunk_bytes": max((c.chunk_bytes for c in chunks), default=0),
        "chunk_size": None,
        "data_format": list(encodings),
        "data_spec": spec.to_json(),
        "column_names": list(names),
        "column_sizes": list(sizes),
        "encryption": None,
        "item_loader": "PyTreeLoader",
    }
    return DatasetIndex(chunks, config, None, source)


# -- shard files ----------------------------------------------------------------------------

_FAMILIES = ("br", "bz2", "gz", "snappy", "zstd")


def _compression_family(compression: Any, where: str) -> str:
    if not isinstance(compression, str):
        raise ValueError(f"{where}: zip_data is set but 'compression' is {compression!r}; expected e.g. 'zstd'")
    family, _, level = compression.partition(":")
    if family not in _FAMILIES or (level and not level.isdigit()):
        raise ValueError(
            f"{where}: MDS compression {compression!r} is unknown; MDS writes one of {', '.join(_FAMILIES)} "
            "(optionally with ':level')"
        )
    return family


def _optional_module(module: str, package: str, compression: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"reading MDS shards compressed with {compression!r} needs {package}: pip install {package}"
        ) from None


def mds_decompress(
    data: bytes | memoryview, compression: str, name: str, expected_size: int | None = None
) -> bytes | bytearray:
    """Undo MDS whole-shard compression (``compression`` as written in the shard's index entry).

    Inflating stops once past ``expected_size`` (the index's size), so a hostile shard never fills
    memory; a snappy shard declaring another size is refused before it is inflated (brotli before
    1.2, which has no output limit, inflates whole and is checked then).
    """
    family = _compression_family(compression, f"shard {name}")
    if family == "zstd":
        from litdata_format._chunks._compression import decompress

        return decompress(data, name, expected_size)
    if family in ("gz", "bz2"):
        return _inflate_stdlib(data, family, name, expected_size)
    if family == "snappy":
        declared = _snappy_declared_size(data, name)
        if expected_size is not None and declared != expected_size:
            raise ValueError(
                f"shard {name}: its snappy header declares {declared} bytes but the index declares {expected_size}; "
                "not inflated (the file does not belong to this index, or is damaged or hostile)"
            )
        codec = _optional_module("snappy", "python-snappy", compression)
    else:
        codec = _optional_module("brotli", "brotli", compression)
        streamed = _inflate_brotli(codec, data, name, expected_size)
        if streamed is not None:
            return streamed
    try:
        out = codec.decompress(bytes(data))
    except Exception as err:
        raise ValueError(f"shard {name}: {compression} decompression failed ({err}); the file is corrupt") from None
    if expected_size is not None and len(out) != expected_size:
        raise ValueError(f"shard {name}: decompressed to {len(out)} bytes but the index says {expected_size}")
    return out


def _snappy_declared_size(data: bytes | memoryview, name: str) -> int:
    """The uncompressed size a raw snappy block declares: its leading little-endian base-128 varint."""
    size = 0
    for i, byte in enumerate(bytes(data[:5])):  # a 32-bit length takes at most 5 bytes
        size |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return size
    raise ValueError(f"shard {name}: no snappy length header (the file is corrupt, or not snappy)")


def _too_big(name: str, limit: int) -> ValueError:
    return ValueError(
        f"shard {name}: decompresses to more than {limit} bytes but the index declares {limit}; "
        "stopped there (the file does not belong to this index, or is damaged or hostile)"
    )


def _inflate_brotli(codec: Any, data: bytes | memoryview, name: str, expected_size: int | None) -> bytearray | None:
    """Inflate a brotli shard at most one piece past ``expected_size``; None if brotli cannot limit its output."""
    decoder = codec.Decompressor()
    try:
        piece = decoder.process(bytes(data), output_buffer_limit=_PIECE)
    except TypeError:  # brotli before 1.2: no output limit, inflated whole by the caller
        return None
    except Exception as err:
        raise ValueError(f"shard {name}: br decompression failed ({err}); the file is corrupt") from None
    limit = expected_size or None
    out = bytearray(piece)
    try:
        while True:
            if limit is not None and len(out) > limit:
                raise _too_big(name, limit)
            if decoder.is_finished():
                break
            if decoder.can_accept_more_data():  # it wants input, and all of it was given
                raise ValueError(f"shard {name}: the br stream is truncated; the file is corrupt")
            out += decoder.process(b"", output_buffer_limit=_PIECE)
    except codec.error as err:
        raise ValueError(f"shard {name}: br decompression failed ({err}); the file is corrupt") from None
    if expected_size is not None and len(out) != expected_size:
        raise ValueError(f"shard {name}: decompressed to {len(out)} bytes but the index says {expected_size}")
    return out


def _inflate_stdlib(data: bytes | memoryview, family: str, name: str, expected_size: int | None) -> bytearray:
    """Inflate a gzip or bz2 shard at most one piece past ``expected_size``."""
    import bz2
    import zlib

    limit = expected_size or None
    out = bytearray()
    pending = bytes(data)
    gz = zlib.decompressobj(wbits=31) if family == "gz" else None
    bz = bz2.BZ2Decompressor() if gz is None else None
    try:
        while True:
            if gz is not None:
                piece = gz.decompress(pending, _PIECE)
                pending, done = gz.unconsumed_tail, gz.eof
            else:
                assert bz is not None
                piece = bz.decompress(pending, _PIECE)
                pending, done = b"", bz.eof
            out += piece
            if limit is not None and len(out) > limit:
                raise _too_big(name, limit)
            if done:
                break
            if not piece and not pending and (gz is not None or (bz is not None and bz.needs_input)):
                raise ValueError(f"shard {name}: the {family} stream is truncated; the file is corrupt")
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"shard {name}: {family} decompression failed ({err}); the file is corrupt") from None
    if expected_size is not None and len(out) != expected_size:
        raise ValueError(f"shard {name}: decompressed to {len(out)} bytes but the index says {expected_size}")
    return out


_PIECE = 1 << 20


class MdsShard(StoredChunk):
    """An MDS shard in memory: ``u32 N | u32 offsets[N+1] | shard settings JSON | samples``.

    The offsets are absolute, so the settings JSON is simply skipped. It implements the
    :class:`~litdata_format._chunks._chunk.Chunk` protocol; ``item(i)`` is sample i's MDS bytes.
    """

    noun, item_noun = "shard", "sample"

    def __init__(self, data: Buffer, name: str) -> None:
        super().__init__(data, name)
        self._read_offsets(len(self._view), exact_start=False)  # the shard's settings JSON follows the table


def open_mds_shard(path: str | Path, info: ChunkInfo, index: DatasetIndex) -> MdsShard:
    """Open the MDS shard stored at ``path``, decompressing it when it is stored compressed.

    ``path`` may also name the uncompressed shard (``info.extra["raw_filename"]``), e.g. a copy
    a cache decompressed once; and when the compressed file is missing but the uncompressed one
    sits next to it (as MDS's own cache leaves it), that one is used.
    """
    path = Path(path)
    compression = info.extra.get("compression")
    raw_name = Path(str(info.extra.get("raw_filename") or info.filename)).name
    if compression and path.name != raw_name:
        if not path.is_file() and (path.parent / raw_name).is_file():
            return MdsShard(map_file(path.parent / raw_name), str(path.parent / raw_name))
        data = _read(path, index).read_bytes()
        plain = mds_decompress(data, compression, str(path), info.chunk_bytes)
        return MdsShard(plain if isinstance(plain, bytearray) else bytearray(plain), str(path))
    return MdsShard(map_file(_read(path, index)), str(path))


def _read(path: Path, index: DatasetIndex) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"MDS shard {path} listed in {index.source} is missing")
    return path


# -- samples --------------------------------------------------------------------------------


class MdsSampleDecoder:
    """Turns an MDS sample's bytes into the dict MDS returns (columns in index order).

    A sample is a ``u32`` length for each variable-size column (in column order), then every
    column's bytes back to back. Same ``decode(item, where)`` interface as ``SampleDecoder``.
    """

    def __init__(self, index: DatasetIndex) -> None:
        config = index.config
        self.names: list[str] = list(config.get("column_names") or [])
        self.encodings = index.data_format
        self.sizes: list[int | None] = list(config.get("column_sizes") or [])
        if not (len(self.names) == len(self.encodings) == len(self.sizes)):
            raise ValueError(f"{index.source}: column names, encodings and sizes do not pair up")
        self._decoders = [mds_decoder(e) for e in self.encodings]
        self._variable = sum(1 for s in self.sizes if not s)

    def decode(self, item: Buffer, where: str = "item") -> dict[str, Any]:
        """The sample stored in ``item`` (``where`` names it in errors)."""
        view = memoryview(item)
        header = 4 * self._variable
        if len(view) < header:
            raise ValueError(f"{where}: {len(view)} bytes is shorter than its {header}-byte size header")
        lengths = iter(np.frombuffer(view[:header], dtype="<u4").tolist())
        sample: dict[str, Any] = {}
        start = header
        for name, encoding, size, decode in zip(self.names, self.encodings, self.sizes, self._decoders):
            length = size if size else next(lengths)
            end = start + length
            if end > len(view):
                raise ValueError(f"{where}: column {name!r} needs bytes up to {end} but the sample has {len(view)}")
            try:
                sample[name] = decode(view[start:end])
            except (ValueError, TypeError, KeyError, IndexError, OSError, EOFError, pickle.UnpicklingError) as err:
                raise ValueError(f"{where}: column {name!r} ({encoding}) cannot be decoded: {err}") from err
            start = end
        return sample


# -- encodings ------------------------------------------------------------------------------


class _Spec:
    def __init__(self, decode: Decoder, size: int | None = None) -> None:
        self.decode = decode
        self.size = size


def _pil() -> Any:
    return import_optional("PIL.Image", "image", "decoding MDS image columns")


def _utf8(view: memoryview) -> str:
    return str(view, "utf-8")


def _scalar(dtype: str) -> _Spec:
    little = np.dtype(dtype).newbyteorder("<")

    def decode(view: memoryview) -> Any:
        return np.frombuffer(view, dtype=little)[0]

    return _Spec(decode, little.itemsize)


def _int64(view: memoryview) -> int:
    return int.from_bytes(view, "little", signed=True)


def _raw_image(view: memoryview) -> Any:
    # [u32 width][u32 height][u32 len(mode)][mode][pixels]
    if len(view) < 12:
        raise ValueError(f"a raw image needs a 12-byte header, got {len(view)} bytes")
    width, height, mode_len = np.frombuffer(view[:12], dtype="<u4").tolist()
    mode = _utf8(view[12 : 12 + mode_len])
    return _pil().frombytes(mode, (width, height), bytes(view[12 + mode_len :]))


def _image_file(view: memoryview) -> Any:
    # Opened lazily from an in-memory copy, like MDS (the shard may be unmapped later).
    return _pil().open(BytesIO(bytes(view)))


def _sized_parts(view: memoryview, start: int, count: int) -> list[memoryview]:
    table_end = start + 4 * count
    if table_end > len(view):
        raise ValueError(f"{count} parts need a {4 * count}-byte size table but only {len(view) - start} bytes remain")
    lengths = np.frombuffer(view[start:table_end], dtype="<u4").tolist()
    parts: list[memoryview] = []
    pos = table_end
    for length in lengths:
        if pos + length > len(view):
            raise ValueError(f"a part runs to byte {pos + length} but the value has {len(view)}")
        parts.append(view[pos : pos + length])
        pos += length
    return parts


def _list_of(decode: Decoder) -> Decoder:
    # [u32 reserved][u32 count][u32 sizes[count]][elements]
    def decode_list(view: memoryview) -> list[Any]:
        if len(view) < 8:
            raise ValueError(f"a list needs an 8-byte header, got {len(view)} bytes")
        count = int(np.frombuffer(view[4:8], dtype="<u4")[0])
        return [decode(part) for part in _sized_parts(view, 8, count)]

    return decode_list


def _jpeg_array(view: memoryview) -> list[Any]:
    # [u32 count][u32 sizes[count]][jpeg files]; MDS refuses to decode an empty one.
    if len(view) < 4:
        raise ValueError("a jpeg_array needs at least 4 bytes")
    count = int(np.frombuffer(view[:4], dtype="<u4")[0])
    if count == 0:
        raise ValueError("a jpeg_array holds no images")
    return [_image_file(part) for part in _sized_parts(view, 4, count)]


# MDS's one-byte codes for an ndarray's value dtype (when not fixed by the encoding).
_NDARRAY_DTYPES = {
    8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 18: "float16", 32: "uint32", 33: "int32",
    34: "float32", 64: "uint64", 65: "int64", 66: "float64",
}  # fmt: skip


def _ndarray(config: str, where: str) -> _Spec:
    # "ndarray[:dtype[:d0,d1,...]]": what the encoding fixes is not stored in the samples.
    args = config.split(":") if config else []
    if len(args) > 2:
        raise ValueError(f"{where}: ndarray encoding 'ndarray:{config}' has too many parts")
    dtype = args[0] if args else None
    if dtype is not None and dtype not in _NDARRAY_DTYPES.values():
        raise ValueError(
            f"{where}: ndarray dtype {dtype!r} is not one MDS supports ({sorted(_NDARRAY_DTYPES.values())})"
        )
    shape: tuple[int, ...] | None = None
    if len(args) == 2:
        try:
            shape = tuple(int(d) for d in args[1].split(","))
        except ValueError:
            raise ValueError(f"{where}: ndarray shape {args[1]!r} is not a comma-separated list of ints") from None
        if any(d < 1 for d in shape):
            raise ValueError(f"{where}: ndarray shape {args[1]!r} has a dimension below 1")

    def decode(view: memoryview) -> np.ndarray:
        pos = 0
        value_dtype = dtype
        if value_dtype is None:
            code = view[0]
            value_dtype = _NDARRAY_DTYPES.get(code)
            if value_dtype is None:
                raise ValueError(f"unknown ndarray dtype code {code}")
            pos = 1
        dims: Any = shape
        if dims is None:
            packed = view[pos]
            ndim, width = packed >> 2, 1 << (packed & 3)
            dims = tuple(np.frombuffer(view[pos + 1 : pos + 1 + ndim * width], dtype=f"<u{width}").tolist())
            pos += 1 + ndim * width
        values = np.frombuffer(view[pos:], dtype=np.dtype(value_dtype).newbyteorder("<"))
        # A writable copy in native byte order: the shard may be unmapped after the sample is read.
        return values.reshape(dims).astype(value_dtype)

    size = None
    if dtype is not None and shape is not None:
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return _Spec(decode, size)


_SIMPLE: dict[str, _Spec] = {
    "bytes": _Spec(bytes),
    "str": _Spec(_utf8),
    "int": _Spec(_int64, 8),
    **{name: _scalar(name) for name in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64")},
    **{name: _scalar(name) for name in ("float16", "float32", "float64")},
    "str_int": _Spec(lambda v: int(_utf8(v))),
    "str_float": _Spec(lambda v: float(_utf8(v))),
    "str_decimal": _Spec(lambda v: Decimal(_utf8(v))),
    "pil": _Spec(_raw_image),
    "jpeg": _Spec(_image_file),
    "png": _Spec(_image_file),
    "list[pil]": _Spec(_list_of(_raw_image)),
    "list[jpeg]": _Spec(_list_of(_image_file)),
    "list[png]": _Spec(_list_of(_image_file)),
    "jpeg_array": _Spec(_jpeg_array),
    "jpegarray": _Spec(_jpeg_array),
    "pkl": _Spec(pickle.loads),
    "json": _Spec(lambda v: json.loads(_utf8(v))),
    "ndarray": _ndarray("", "ndarray"),
}


def _spec(encoding: str, where: str = "MDS") -> _Spec:
    found = _SIMPLE.get(encoding)
    if found is not None:
        return found
    name, sep, config = encoding.partition(":")
    if name == "ndarray" and sep:
        return _ndarray(config, where)
    raise ValueError(
        f"{where}: MDS column encoding {encoding!r} is not supported; known: {', '.join(sorted(_SIMPLE))}, "
        "ndarray:<dtype>[:<shape>]"
    )


def mds_decoder(encoding: str) -> Decoder:
    """The function that decodes one column value stored with MDS ``encoding``."""
    return _spec(encoding).decode
