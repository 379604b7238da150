"""Typed wrappers that say what a sample leaf is: an image, a clip, a mesh, a graph, ...

A bare string is ambiguous (a caption or a path?), so a user wraps the value:
``Image(path="cat.png")``, ``Audio(array=wave, sampling_rate=16000)``. The media serializers
recognise the wrappers and store the encoded file bytes; reading decodes them (see each
serializer for what comes back). Field names and defaults follow upstream LitData's
``litdata.types`` so code written for it runs unchanged.

No decoder library is imported here.
"""

from __future__ import annotations

import builtins
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from litdata_format._guards import is_path_like, is_str_dict

__all__ = [
    "GRAPH_FIELDS",
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
    "is_pyg_data",
]

# The PyG Data attributes Graph names as fields (the rest travel in Graph.data).
GRAPH_FIELDS = ("x", "edge_index", "edge_attr", "y", "pos", "batch")


def is_pyg_data(value: object) -> bool:
    """Whether ``value`` is a PyTorch Geometric ``Data``/``HeteroData``/``Batch`` (no import needed)."""
    module = getattr(type(value), "__module__", "") or ""
    return module.startswith("torch_geometric.data") and hasattr(value, "to_dict")


@dataclass
class MediaRef:
    """A file given by path or by its bytes (with ``path`` then only naming the extension)."""

    path: str | None = None
    bytes: builtins.bytes | None = None

    def __post_init__(self) -> None:
        if self.path is not None:
            self.path = os.fspath(self.path) if isinstance(self.path, os.PathLike) else str(self.path)
        if self.bytes is not None:
            # The dataclass's types bind no caller: refuse what would fail later, when the sample is written.
            if not isinstance(self.bytes, (builtins.bytes, bytearray, memoryview)):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"{type(self).__name__}.bytes must be bytes, got {type(self.bytes).__name__}")
            self.bytes = builtins.bytes(self.bytes)


class _Unset:
    """Marks a keyword the caller did not pass (so ``None`` can mean "no cap")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<UNSET>"


_UNSET: Any = _Unset()


def _check_quality(owner: str, quality: int | None, max_quality: int | None) -> None:
    if quality is not None and max_quality is not None:
        raise ValueError(
            f"{owner}: pass either quality= (always re-encode as JPEG at that quality) or "
            "max_quality= (keep JPEG bytes already at or below the cap, re-encode the rest), not both"
        )


@dataclass
class Image(MediaRef):
    """An image: ``path=``, ``bytes=``, a pixel ``array=`` (numpy or tensor, HWC) or a PIL ``image=``.

    Path and bytes are stored as they are. Pixels, a PIL image, or any of ``mode``, ``format``,
    ``quality``, ``max_quality`` make the writer encode once, to ``format`` (PNG by default;
    JPEG whenever ``max_quality`` is set). ``max_quality`` keeps JPEG bytes whose estimated
    quality is already at or below the cap. Reading gives an RGB uint8 tensor shaped (C, H, W).
    """

    array: Any = None
    image: Any = None
    mode: str | None = None
    format: str | None = None
    quality: int | None = None
    max_quality: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_quality("Image", self.quality, self.max_quality)


@dataclass
class Jpeg(MediaRef):
    """A JPEG: like :class:`Image` but always JPEG, with ``max_quality`` defaulting to 95.

    ``Jpeg(quality=80)`` re-encodes at 80 (the default cap is dropped). Reading gives an RGB
    uint8 tensor shaped (C, H, W).
    """

    array: Any = None
    image: Any = None
    mode: str | None = None
    quality: int | None = None
    max_quality: Any = _UNSET

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_quality is _UNSET:
            self.max_quality = 95 if self.quality is None else None
        _check_quality("Jpeg", self.quality, self.max_quality)


@dataclass
class JpegArray:
    """A list of JPEGs stored as one leaf; ``quality``/``max_quality`` apply to its ``Jpeg`` items."""

    images: list[Any] = field(default_factory=list[Any])
    quality: int | None = None
    max_quality: Any = _UNSET

    def __post_init__(self) -> None:
        if self.max_quality is _UNSET:
            self.max_quality = 95 if self.quality is None else None
        _check_quality("JpegArray", self.quality, self.max_quality)


@dataclass
class Pil(MediaRef):
    """An image stored as raw pixels (mode, size, bytes); reading gives a PIL image back."""

    array: Any = None
    image: Any = None
    mode: str | None = None


@dataclass
class Tiff(MediaRef):
    """A TIFF file, or an ``array=``/``image=`` written with tifffile; reading gives a numpy array."""

    array: Any = None
    image: Any = None


@dataclass
class Text(MediaRef):
    """UTF-8 text from ``text=``, a file ``path=`` or ``bytes=``; reading gives a ``str``."""

    text: str | None = None


@dataclass
class File(MediaRef):
    """Any file, stored and returned as bytes; its extension is kept in the data_format."""


@dataclass
class Mesh(MediaRef):
    """A 3D mesh file (.glb, .ply, .stl) or a trimesh ``mesh=`` exported as ``file_type``."""

    mesh: Any = None
    file_type: str = "glb"


@dataclass
class Pdf(MediaRef):
    """A PDF file, its bytes, or an open ``pdf=`` (pypdf reader or pdfplumber document)."""

    pdf: Any = None


@dataclass
class Nifti(MediaRef):
    """A NIfTI volume: a file, its bytes, a nibabel ``image=``, or ``array=`` with an ``affine=``."""

    image: Any = None
    array: Any = None
    affine: Any = None


@dataclass
class Audio(MediaRef):
    """Audio: a file, its bytes, or a waveform ``array=`` with its ``sampling_rate=`` (stored as WAV)."""

    array: Any = None
    sampling_rate: int | None = None
    num_channels: int | None = None
    stream_index: int | None = None


@dataclass
class Video(MediaRef):
    """Video: a file, its bytes, or a frame ``array=`` (N, H, W, C) encoded to MP4 at ``fps``.

    The decoder options (``dimension_order``, ``seek_mode``, ...) are kept for source
    compatibility with upstream, where they configure torchcodec.
    """

    array: Any = None
    fps: float = 25.0
    stream_index: int | None = None
    dimension_order: str = "NCHW"
    num_ffmpeg_threads: int = 1
    seek_mode: str = "approximate"
    device: str = "cpu"


@dataclass
class Tensor(MediaRef):
    """A tensor leaf: ``array=`` (tensor or numpy), or raw ``path=``/``bytes=`` with a torch ``dtype=``.

    1-D arrays use the header-less layout (the one TokensLoader reads).
    """

    array: Any = None
    dtype: Any = None

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of ``array``.

        Raises:
            AttributeError: the tensor was given as a file, without ``array=``.
        """
        if self.array is None:
            raise AttributeError("Tensor.shape needs array=")
        return tuple(self.array.shape)


@dataclass
class Graph:
    """A graph stored as packed tensors (never ``torch.save``).

    Pass PyG-style fields (``Graph(x=..., edge_index=...)``) or ``data=`` holding a PyG
    ``Data``/``HeteroData`` or a plain dict; fields given here override ``data``. Any other
    ``data=`` (a NetworkX graph, ...) is pickled instead. Reading gives a PyG object when
    torch-geometric is installed, else a ``Graph`` (call :meth:`to_pyg` later).
    """

    x: Any = None
    edge_index: Any = None
    edge_attr: Any = None
    y: Any = None
    pos: Any = None
    batch: Any = None
    data: Any = None

    def to_mapping(self) -> dict[str, Any]:
        """The attributes as one dict, as ``Data.to_dict()`` gives them (empty for an opaque ``data``)."""
        mapping: dict[str, Any] = {}
        if is_pyg_data(self.data):
            mapping.update(self.data.to_dict())
        elif is_str_dict(self.data):
            mapping.update(self.data)
        elif self.data is not None:
            if any(getattr(self, name) is not None for name in GRAPH_FIELDS):
                raise TypeError(
                    "Graph.data= must be a PyG Data, a dict, or omitted when tensor fields are given; "
                    "an opaque data= object (e.g. a NetworkX graph) cannot be mixed with x=, edge_index=, ..."
                )
            return mapping
        for name in GRAPH_FIELDS:
            value = getattr(self, name)
            if value is not None:
                mapping[name] = value
        return mapping

    def to_pyg(self) -> Any:
        """Build the PyG ``Data`` (or ``HeteroData`` when values are per-type dicts)."""
        try:
            from torch_geometric.data import Data, HeteroData  # pyright: ignore[reportMissingTypeStubs]  # PyG ships no types
        except ImportError:
            raise ImportError("Graph.to_pyg() needs PyTorch Geometric: pip install torch-geometric") from None
        mapping = self.to_mapping()
        hetero = any(
            is_str_dict(value) and any(hasattr(child, "shape") for child in value.values())
            for value in mapping.values()
        )
        return HeteroData.from_dict(mapping) if hetero else Data.from_dict(mapping)


# --- reading a wrapper's file bytes (shared by the media serializers) ---------------------


def media_extension(path: str | None, default: str = "") -> str:
    """The lower-case extension of ``path`` without the dot (a URL query is ignored)."""
    if not path:
        return default
    return os.path.splitext(str(path).split("?", 1)[0])[1].replace(".", "").lower()


def media_path_and_bytes(item: Any) -> tuple[str | None, builtins.bytes | None]:
    """``(path, bytes)`` of a wrapper or of a Hugging Face style ``{"path", "bytes"}`` dict."""
    if isinstance(item, MediaRef):
        return item.path, item.bytes
    if is_str_dict(item):
        payload = item.get("bytes")
        return item.get("path"), (builtins.bytes(payload) if payload is not None else None)
    return None, None


def read_media_bytes(item: Any) -> tuple[builtins.bytes, str]:
    """The stored bytes and the extension of a wrapper, a ``{"path", "bytes"}`` dict, bytes or a path.

    Given bytes win over the path, which then only names the extension.
    """
    path, payload = media_path_and_bytes(item)
    if payload is not None:
        return payload, media_extension(path)
    if isinstance(item, MediaRef) and item.path is None:
        given = [name for name in ("array", "image", "mesh", "pdf", "text") if getattr(item, name, None) is not None]
        if given:
            raise TypeError(
                f"{type(item).__name__} has {', '.join(given)} but no path or bytes, and this serializer "
                "cannot encode that; pass path= or bytes="
            )
        raise TypeError(f"{type(item).__name__} needs path=, bytes= or a payload such as array=")
    if path:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"media file not found: {path}")
        with open(path, "rb") as handle:
            return handle.read(), media_extension(path)
    if isinstance(item, (builtins.bytes, bytearray)):
        return builtins.bytes(item), ""
    if is_path_like(item):
        item = os.fspath(item)
    if isinstance(item, str) and os.path.isfile(item):
        with open(item, "rb") as handle:
            return handle.read(), media_extension(item)
    raise TypeError(f"cannot read media bytes from a {type(item).__name__}; pass a path, bytes or a wrapper")


def has_media_extension(item: Any, extensions: tuple[str, ...]) -> bool:
    """Whether ``item`` names a file with one of ``extensions``.

    A wrapper or a ``{"path"}`` dict only needs the extension; a plain string must also be an
    existing file (otherwise it is text).
    """
    if isinstance(item, MediaRef):
        return bool(item.path) and media_extension(item.path) in extensions
    if is_str_dict(item):
        path = item.get("path")
        return bool(path) and media_extension(path) in extensions
    if is_path_like(item):
        item = os.fspath(item)
    return isinstance(item, str) and os.path.isfile(item) and media_extension(item) in extensions


# --- recognising objects of optional libraries without importing them ----------------------


def loaded_attribute(module: str, name: str) -> Any:
    """``module.name`` if the process already imported ``module``, else None (never imports)."""
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def is_instance_of_loaded(value: Any, module: str, *names: str) -> bool:
    """``isinstance(value, module.name)`` for classes of a library only if it is already imported.

    An object of such a class can only exist once its library was imported, so a library that is
    not in ``sys.modules`` means "no" without the cost of importing it.
    """
    classes = tuple(c for c in (loaded_attribute(module, name) for name in names) if isinstance(c, type))
    return bool(classes) and isinstance(value, classes)


def check_decode(owner: str, decode: str, allowed: tuple[str, ...]) -> str:
    """Validate a serializer's ``decode=`` option."""
    if decode not in allowed:
        raise ValueError(f"{owner}(decode={decode!r}): decode must be one of {', '.join(map(repr, allowed))}")
    return decode
