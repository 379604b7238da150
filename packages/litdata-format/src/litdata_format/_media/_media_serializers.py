"""Serializers for media leaves, and the tensor serializers' support for the :class:`Tensor` wrapper.

Each (video and audio live in ``_av_serializers``) stores the encoded file (never decoded pixels or
samples) exactly as upstream LitData 0.2.76 does, under the same data_format name, and accepts the
same values in ``can_serialize``. The decoder libraries are imported only when a value is encoded
or decoded; ``can_serialize`` recognises their objects by looking in ``sys.modules``, since such
an object can only exist once its library was imported.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import struct
from typing import Any, cast

import numpy as np

from litdata_format._guards import is_path_like, is_str_dict
from litdata_format._media._graph_pack import coerce_tensor, pack_graph, unpack_graph
from litdata_format._media._image_codec import (
    IMAGE_DECODES,
    as_numpy,
    decode_image,
    encode_image_wrapper,
    pil_from_array,
    pil_module,
)
from litdata_format._media._wrappers import (
    File,
    Graph,
    Image,
    Jpeg,
    JpegArray,
    MediaRef,
    Mesh,
    Nifti,
    Pdf,
    Pil,
    Tensor,
    Text,
    Tiff,
    check_decode,
    has_media_extension,
    is_instance_of_loaded,
    is_pyg_data,
    loaded_attribute,
    media_extension,
    read_media_bytes,
)
from litdata_format._optional import import_optional
from litdata_format._samples._serializers import (
    Buffer,
    NoHeaderTensorSerializer,
    Serializer,
    TensorSerializer,
)

__all__ = [
    "FileSerializer",
    "GraphSerializer",
    "ImageSerializer",
    "JPEGArraySerializer",
    "JPEGSerializer",
    "MeshSerializer",
    "NiftiSerializer",
    "PDFSerializer",
    "PILSerializer",
    "TIFFSerializer",
    "TextSerializer",
    "TypedNoHeaderTensorSerializer",
    "TypedTensorSerializer",
]


# --- text and files -------------------------------------------------------------------------


class TextSerializer(Serializer):
    """:class:`Text` as UTF-8 (``text=`` encoded, ``path=``/``bytes=`` stored as they are); reads a str."""

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if isinstance(data, Text):
            if data.text is not None:
                return data.text.encode("utf-8"), "text"
            if data.path is None and data.bytes is None:
                raise TypeError("Text needs text=, path= or bytes=")
        return read_media_bytes(data)[0], "text"

    def deserialize(self, data: Buffer) -> str:
        return bytes(data).decode("utf-8")

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, Text)


class FileSerializer(Serializer):
    """:class:`File` bytes as they are, named ``file:{extension}``; reads the bytes."""

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if isinstance(data, MediaRef):
            payload, ext = read_media_bytes(data)
            return payload, (f"file:{ext}" if ext else "file")
        with open(data, "rb") as handle:
            return handle.read(), f"file:{media_extension(os.fspath(handle.name))}"

    def deserialize(self, data: Buffer) -> bytes:
        return bytes(data)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, File)


class TIFFSerializer(Serializer):
    """TIFF files (a :class:`Tiff`, or an existing ``.tif``/``.tiff`` path); reads a numpy array."""

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if isinstance(data, Tiff) and (data.array is not None or data.image is not None):
            tifffile = import_optional("tifffile", "tiff", "writing Tiff(array=...)")
            pixels = as_numpy(data.array if data.array is not None else np.asarray(data.image))
            buffer = io.BytesIO()
            tifffile.imwrite(buffer, pixels)
            return buffer.getvalue(), None
        if isinstance(data, (Tiff, dict)):
            return read_media_bytes(data)[0], None
        if not isinstance(data, str) or not os.path.isfile(data):
            raise ValueError(f"the tifffile serializer needs an existing file path, got {data!r}")
        with open(data, "rb") as handle:
            return handle.read(), None

    def deserialize(self, data: Buffer) -> Any:
        tifffile = import_optional("tifffile", "tiff", "decoding TIFF images")
        return tifffile.imread(io.BytesIO(bytes(data)))

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Tiff):
            return True
        return isinstance(data, str) and os.path.isfile(data) and data.lower().endswith((".tif", ".tiff"))


# --- images ---------------------------------------------------------------------------------


class ImageSerializer(Serializer):
    """An :class:`Image`, or an existing image file path, stored as the file (``image:{ext}``).

    Args:
        decode: ``"tensor"`` (an RGB uint8 tensor shaped (C, H, W), as upstream), ``"numpy"``,
            ``"pil"`` or ``"bytes"``.
    """

    EXTENSIONS = ("jpg", "jpeg", "png", "webp", "bmp", "gif")

    def __init__(self, decode: str = "tensor") -> None:
        self.decode = check_decode("ImageSerializer", decode, IMAGE_DECODES)

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if isinstance(data, Image) and (
            data.array is not None
            or data.image is not None
            or data.quality is not None
            or data.max_quality is not None
            or data.mode
            or data.format
        ):
            payload, ext = encode_image_wrapper(data, data.format or "PNG")
            return payload, f"image:{ext}"
        payload, ext = read_media_bytes(data)
        return payload, f"image:{ext or 'jpg'}"

    def deserialize(self, data: Buffer) -> Any:
        return decode_image(data, self.decode)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, Image) or has_media_extension(data, self.EXTENSIONS)


class PILSerializer(Serializer):
    """PIL images other than JPEG files, and :class:`Pil`, as raw pixels; reads a PIL image.

    Layout: ``u32 width, u32 height, u32 len(mode)`` (little-endian), the mode, ``tobytes()``.
    """

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        image = data
        if isinstance(data, Pil):
            if data.image is not None:
                image = data.image
            elif data.array is not None:
                image = pil_from_array(data.array)
            else:
                image = pil_module().open(io.BytesIO(read_media_bytes(data)[0]))
            if data.mode and image.mode != data.mode:
                image = image.convert(data.mode)
        mode = image.mode.encode("utf-8")
        width, height = image.size
        return struct.pack("<III", width, height, len(mode)) + mode + image.tobytes(), None

    def deserialize(self, data: Buffer) -> Any:
        width, height, size = struct.unpack_from("<III", data, 0)
        mode = bytes(data[12 : 12 + size]).decode("utf-8")
        return pil_module().frombytes(mode, (width, height), bytes(data[12 + size :]))

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Pil):
            return True
        return is_instance_of_loaded(data, "PIL.Image", "Image") and not is_instance_of_loaded(
            data, "PIL.JpegImagePlugin", "JpegImageFile"
        )


class JPEGSerializer(Serializer):
    """A :class:`Jpeg` or a PIL ``JpegImageFile``, stored as the JPEG file.

    Args:
        decode: as for :class:`ImageSerializer` (default: an RGB uint8 (C, H, W) tensor).
    """

    def __init__(self, decode: str = "tensor") -> None:
        self.decode = check_decode("JPEGSerializer", decode, IMAGE_DECODES)

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if isinstance(data, Jpeg):
            if (
                data.array is not None
                or data.image is not None
                or data.mode
                or data.quality is not None
                or data.max_quality is not None
            ):
                return encode_image_wrapper(data, "JPEG", force_jpeg=True)[0], None
            return read_media_bytes(data)[0], None
        if is_instance_of_loaded(data, "PIL.JpegImagePlugin", "JpegImageFile"):
            if not hasattr(data, "filename"):
                raise ValueError(
                    "this JPEG image has no filename; open the image inside the function that makes the "
                    "samples so its file can be stored as it is"
                )
            stored = _file_bytes_of(data)
            if stored is not None:
                return stored, None
            buffer = io.BytesIO()
            data.save(buffer, format="JPEG")
            return buffer.getvalue(), None
        if is_instance_of_loaded(data, "PIL.Image", "Image"):
            buffer = io.BytesIO()
            data.convert("RGB").save(buffer, quality=100, format="JPEG")
            return buffer.getvalue(), None
        raise TypeError(f"the jpeg serializer needs a PIL JpegImageFile or a Jpeg; got {type(data).__name__}")

    def deserialize(self, data: Buffer) -> Any:
        return decode_image(data, self.decode)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, Jpeg) or is_instance_of_loaded(data, "PIL.JpegImagePlugin", "JpegImageFile")


def _file_bytes_of(image: Any) -> bytes | None:
    """The bytes of the file a lazily opened PIL image came from, or None if it has none.

    Read through the image's own open file when PIL still holds it (with one ``pread``, which
    leaves PIL's position alone, when it has a descriptor), else from its filename.
    """
    if not image.filename:
        return None
    handle = getattr(image, "fp", None)  # opened by PIL from the path, so the file starts at 0
    if handle is not None and not getattr(handle, "closed", True):
        whole = _pread_all(handle)
        if whole is not None:
            return whole
        if getattr(handle, "seekable", lambda: False)():
            position = handle.tell()
            try:
                handle.seek(0)
                return handle.read()
            finally:
                handle.seek(position)
    if os.path.isfile(image.filename):
        with open(image.filename, "rb") as source:
            return source.read()
    return None


def _pread_all(handle: Any) -> bytes | None:
    """The whole file behind ``handle`` in one ``pread``, or None if it has no descriptor or size."""
    try:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
    except (AttributeError, OSError, ValueError):  # BytesIO, a pipe, a closed descriptor
        return None
    return data if data and len(data) == size else None  # else empty or growing: read it as a stream


def _with_array_quality(image: Jpeg, owner: JpegArray) -> Jpeg:
    """Apply a JpegArray's quality settings to one of its Jpeg items."""
    if owner.quality is not None and image.quality != owner.quality:
        quality, cap = owner.quality, None
    elif owner.max_quality is not None and image.quality is None and image.max_quality != owner.max_quality:
        quality, cap = None, owner.max_quality
    else:
        return image
    return dataclasses.replace(image, quality=quality, max_quality=cap)


class JPEGArraySerializer(Serializer):
    """A :class:`JpegArray` or a list of PIL JPEG images as one leaf; reads a list of decoded images.

    Layout: ``u32 count, u32 sizes[count]`` (little-endian), then the files back to back.
    """

    def __init__(self, decode: str = "tensor") -> None:
        self.decode = check_decode("JPEGArraySerializer", decode, IMAGE_DECODES)

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        images = data.images if isinstance(data, JpegArray) else data
        if not images:
            raise ValueError("a JpegArray needs at least one image")
        jpeg = JPEGSerializer()
        files: list[bytes] = []
        for image in images:
            if isinstance(image, Jpeg):
                own = _with_array_quality(image, data) if isinstance(data, JpegArray) else image
                files.append(jpeg.serialize(own)[0])
            elif isinstance(image, Image):
                files.append(ImageSerializer().serialize(image)[0])
            elif isinstance(image, (bytes, bytearray, str, dict, MediaRef)):
                files.append(read_media_bytes(image)[0])
            else:
                files.append(jpeg.serialize(image)[0])
        header = struct.pack(f"<I{len(files)}I", len(files), *(len(f) for f in files))
        return header + b"".join(files), None

    def deserialize(self, data: Buffer) -> list[Any]:
        if len(data) < 4:
            raise ValueError("jpeg_array leaf: too short to hold the image count")
        (count,) = struct.unpack_from("<I", data, 0)
        if count == 0:
            raise ValueError("jpeg_array leaf: it holds no image")
        start = 4 + 4 * count
        if len(data) < start:
            raise ValueError(f"jpeg_array leaf: too short for the sizes of {count} images")
        images: list[Any] = []
        for size in struct.unpack_from(f"<{count}I", data, 4):
            images.append(decode_image(data[start : start + size], self.decode))
            start += size
        return images

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, JpegArray):
            return True
        jpeg_class = loaded_attribute("PIL.JpegImagePlugin", "JpegImageFile")
        return (
            isinstance(jpeg_class, type)
            and isinstance(data, (list, tuple))
            and all(isinstance(item, jpeg_class) for item in cast("list[object] | tuple[object, ...]", data))
        )


# --- scientific and 3D formats --------------------------------------------------------------


def _nifti_file(image: Any) -> tuple[bytes, str]:
    """The file a nibabel image was loaded from, else its bytes as a .nii."""
    file_map = getattr(image, "file_map", None)
    if file_map is not None and "image" in file_map:
        filename = getattr(file_map["image"], "filename", None)
        if filename and os.path.isfile(filename):
            with open(filename, "rb") as handle:
                ext = "nii.gz" if str(filename).lower().endswith(".nii.gz") else "nii"
                return handle.read(), f"nifti:{ext}"
    return image.to_bytes(), "nifti:nii"


class NiftiSerializer(Serializer):
    """NIfTI volumes (``.nii``/``.nii.gz``), named ``nifti:{ext}``; reads a nibabel ``Nifti1Image``."""

    def __init__(self, decode: bool = True) -> None:
        self.decode = decode

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        if is_instance_of_loaded(data, "nibabel.spatialimages", "SpatialImage"):
            return _nifti_file(data)
        if isinstance(data, Nifti):
            if data.image is not None:
                return _nifti_file(data.image)
            if data.array is not None:
                nibabel = import_optional("nibabel", "nifti", "writing Nifti(array=...)")
                affine = data.affine if data.affine is not None else np.eye(4)
                return nibabel.Nifti1Image(as_numpy(data.array), affine).to_bytes(), "nifti:nii"
            payload, ext = read_media_bytes(data)
            return payload, f"nifti:{ext or 'nii'}"
        path = data.get("path") if is_str_dict(data) else data
        if is_path_like(path):
            path = os.fspath(path)
        ext = "nii.gz" if isinstance(path, str) and path.lower().endswith(".nii.gz") else "nii"
        return read_media_bytes(data)[0], f"nifti:{ext}"

    def deserialize(self, data: Buffer) -> Any:
        raw = bytes(data)
        if not self.decode:
            return raw
        nibabel = import_optional("nibabel", "nifti", "decoding NIfTI volumes")
        return nibabel.Nifti1Image.from_bytes(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Nifti) or is_instance_of_loaded(data, "nibabel.spatialimages", "SpatialImage"):
            return True
        path = data.get("path") if is_str_dict(data) else data
        if is_path_like(path):
            path = os.fspath(path)
        if not isinstance(path, str):
            return False
        name = path.lower().split("?", 1)[0]
        return name.endswith((".nii", ".nii.gz")) and (isinstance(data, dict) or os.path.isfile(path))


class MeshSerializer(Serializer):
    """Meshes (``.glb``, ``.ply``, ``.stl`` or a trimesh object), named ``mesh:{ext}``; reads with trimesh."""

    EXTENSIONS = ("glb", "ply", "stl")

    def __init__(self, decode: bool = True) -> None:
        self.decode = decode
        self._file_type = "glb"

    def setup(self, data_format: str) -> None:
        if data_format.startswith("mesh:"):
            self._file_type = data_format.split(":", 1)[1] or "glb"

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        mesh = data.mesh if isinstance(data, Mesh) else data
        file_type = data.file_type if isinstance(data, Mesh) else "glb"
        if is_instance_of_loaded(mesh, "trimesh", "Trimesh", "Scene"):
            metadata = getattr(mesh, "metadata", None)
            source = (metadata.get("file_path") or metadata.get("file_name")) if is_str_dict(metadata) else None
            if source and os.path.isfile(source):
                payload, ext = read_media_bytes(source)
                return payload, f"mesh:{ext or 'glb'}"
            exported = mesh.export(file_type=file_type)
            return (exported.encode("utf-8") if isinstance(exported, str) else bytes(exported)), f"mesh:{file_type}"
        payload, ext = read_media_bytes(data)
        if not ext and isinstance(data, Mesh) and data.path is None:
            ext = data.file_type  # bytes alone: file_type says what they are
        if ext not in self.EXTENSIONS:
            raise ValueError(f"mesh files must end with .glb, .ply or .stl; got {ext or 'no extension'!r}")
        return payload, f"mesh:{ext}"

    def deserialize(self, data: Buffer) -> Any:
        raw = bytes(data)
        if not self.decode:
            return raw
        trimesh = import_optional("trimesh", "mesh", "decoding meshes")
        return trimesh.load(io.BytesIO(raw), file_type=self._file_type)

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Mesh) or is_instance_of_loaded(data, "trimesh", "Trimesh", "Scene"):
            return True
        return has_media_extension(data, self.EXTENSIONS)


def _is_open_pdf(document: Any) -> bool:
    """Whether ``document`` is an open pdfplumber document or pypdf reader."""
    return is_instance_of_loaded(document, "pdfplumber.pdf", "PDF") or is_instance_of_loaded(
        document, "pypdf", "PdfReader"
    )


def _open_pdf_bytes(document: Any) -> bytes | None:
    """The bytes behind an open pdfplumber document or pypdf reader, or None if not one."""
    if not _is_open_pdf(document):
        return None
    stream = getattr(document, "stream", None)
    if stream is None:
        raise TypeError("this PDF object has no readable stream; pass Pdf(path=...) or Pdf(bytes=...)")
    name = getattr(stream, "name", None)
    if isinstance(name, str) and os.path.isfile(name):
        with open(name, "rb") as handle:
            return handle.read()
    stream.seek(0)
    return stream.read()


class PDFSerializer(Serializer):
    """PDF documents (a :class:`Pdf`, bytes starting with ``%PDF``, a path); reads a ``pypdf.PdfReader``."""

    EXTENSIONS = ("pdf",)

    def __init__(self, decode: bool = True) -> None:
        self.decode = decode

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        document = data.pdf if isinstance(data, Pdf) and data.pdf is not None else data
        opened = _open_pdf_bytes(document)
        if opened is not None:
            return opened, "pdf"
        if isinstance(document, (bytes, bytearray)) and bytes(document[:4]) == b"%PDF":
            return bytes(document), "pdf"
        return read_media_bytes(document)[0], "pdf"

    def deserialize(self, data: Buffer) -> Any:
        raw = bytes(data)
        if not self.decode:
            return raw
        pypdf = import_optional("pypdf", "pdf", "decoding PDF documents")
        return pypdf.PdfReader(io.BytesIO(raw))

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Pdf) or _is_open_pdf(data):
            return True
        if isinstance(data, (bytes, bytearray)) and bytes(data[:4]) == b"%PDF":
            return True
        return has_media_extension(data, self.EXTENSIONS)


class GraphSerializer(Serializer):
    """PyG graphs and :class:`Graph` as packed tensors (``graph``), opaque graphs pickled (``graph:pickle``).

    Reads a PyG ``Data``/``HeteroData`` when torch-geometric is installed, else a :class:`Graph`;
    a pickled graph comes back as the stored object (e.g. a NetworkX graph).
    """

    unpickles = True  # even packed graphs keep their layout (``_meta``) as a pickle

    def __init__(self) -> None:
        self._pickled = False

    def setup(self, data_format: str) -> None:
        self._pickled = data_format.endswith("pickle")

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return pack_graph(data)

    def deserialize(self, data: Buffer) -> Any:
        return unpack_graph(data, pickled=self._pickled)

    def can_serialize(self, data: Any) -> bool:
        return isinstance(data, Graph) or is_pyg_data(data)


# --- the Tensor wrapper ---------------------------------------------------------------------


class TypedNoHeaderTensorSerializer(NoHeaderTensorSerializer):
    """``no_header_tensor`` that also takes a 1-D :class:`Tensor` (or raw bytes with a dtype)."""

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return super().serialize(coerce_tensor(data))

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Tensor):
            if data.array is not None:
                return len(data.array.shape) == 1
            return (data.path is not None or data.bytes is not None) and data.dtype is not None
        return super().can_serialize(data)


class TypedTensorSerializer(TensorSerializer):
    """``tensor`` that also takes a :class:`Tensor` wrapping an array of ndim != 1."""

    def serialize(self, data: Any) -> tuple[bytes, str | None]:
        return super().serialize(coerce_tensor(data))

    def can_serialize(self, data: Any) -> bool:
        if isinstance(data, Tensor):
            return data.array is not None and len(data.array.shape) != 1
        return super().can_serialize(data)
