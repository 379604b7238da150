"""Image encoding and decoding for the image, jpeg, jpeg_array and pil serializers (Pillow, lazily).

Encoding follows upstream LitData 0.2.76 so the same wrapper gives the same bytes: pixels become
a PIL image (arrays downcast to what Pillow can save), which is saved once in the requested
format. A JPEG cap (``max_quality``) keeps JPEG bytes whose quality, estimated from the
luminance quantization table against the IJG tables, is already at or below the cap.

Decoding gives what upstream readers get: RGB pixels as a uint8 tensor shaped (C, H, W), with
the EXIF orientation applied to JPEGs that carry an EXIF block. Pillow does the decoding here
(upstream uses torchvision when it can; both decode with libjpeg-turbo / libpng).
"""

from __future__ import annotations

import functools
import io
import os
import sys
import warnings
from typing import Any

import numpy as np

from litdata_format._media._wrappers import read_media_bytes
from litdata_format._optional import import_optional
from litdata_format._samples._serializers import Buffer

__all__ = [
    "as_numpy",
    "decode_image",
    "encode_image_wrapper",
    "estimate_jpeg_quality",
    "jpeg_has_exif",
    "pil_from_array",
    "pil_module",
    "save_pil",
]

IMAGE_DECODES = ("tensor", "pil", "numpy", "bytes")


def pil_module() -> Any:
    """``PIL.Image``, or an ImportError naming the ``image`` extra."""
    return import_optional("PIL.Image", "image", "encoding or decoding images")


def as_numpy(array: Any) -> np.ndarray:
    """A numpy view of a numpy array, a (CPU or not) tensor or a nested sequence."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(array, torch.Tensor):
        return array.detach().cpu().numpy()
    return np.asarray(array)


# The sample dtypes Pillow's fromarray understands for 2-D arrays.
_PIL_DTYPES = frozenset(
    np.dtype(name)
    for name in ("|b1", "|u1", "<u2", ">u2", "<i2", ">i2", "<u4", ">u4", "<i4", ">i4", "<f4", ">f4", "<f8", ">f8")
)


def _pil_ready(array: Any) -> np.ndarray:
    """Cast pixels to a dtype Pillow saves: colour images to uint8 (floats in [0, 1] scaled by 255)."""
    array = as_numpy(array)
    dtype = array.dtype
    if array.ndim >= 3:
        if np.issubdtype(dtype, np.floating) and float(np.nanmax(array)) <= 1.0:
            array = np.clip(array, 0.0, 1.0) * 255.0
        elif dtype != np.uint8:
            warnings.warn(f"Downcasting array dtype {dtype} to uint8 for image encoding.", stacklevel=3)
        return array.astype(np.uint8)
    if dtype in _PIL_DTYPES:
        return array
    order = dtype.byteorder
    if order == "=":
        order = "<" if sys.byteorder == "little" else ">"
    size = dtype.itemsize
    while size >= 1:
        try:
            target = np.dtype(f"{order}{dtype.kind}{size}")
        except TypeError:
            target = None
        if target is not None and target in _PIL_DTYPES:
            warnings.warn(f"Downcasting array dtype {dtype} to {target} for image encoding.", stacklevel=3)
            return array.astype(target)
        size //= 2
    raise TypeError(f"image arrays of dtype {dtype} cannot be encoded; convert them to uint8")


def pil_from_array(array: Any) -> Any:
    """A PIL image from HWC / HW pixels."""
    return pil_module().fromarray(_pil_ready(array))


def native_format(image: Any) -> str:
    """The format a PIL image came in, else PNG for the modes PNG holds and TIFF for the rest."""
    if getattr(image, "format", None):
        return str(image.format)
    return "PNG" if image.mode in {"1", "L", "LA", "RGB", "RGBA"} else "TIFF"


def save_pil(image: Any, fmt: str, quality: int | None = None, mode: str | None = None) -> tuple[bytes, str]:
    """Encode a PIL image; returns the bytes and the extension (``jpg`` for JPEG)."""
    if mode and image.mode != mode:
        image = image.convert(mode)
    fmt = "JPEG" if fmt.upper() in {"JPG", "JPEG"} else fmt.upper()
    if fmt == "JPEG" and image.mode not in {"RGB", "L"}:
        image = image.convert("RGB")
    options: dict[str, Any] = {"format": fmt}
    if quality is not None and fmt in {"JPEG", "WEBP"}:
        options["quality"] = int(quality)
    buffer = io.BytesIO()
    image.save(buffer, **options)
    return buffer.getvalue(), ("jpg" if fmt == "JPEG" else fmt.lower())


# --- JPEG quality estimation --------------------------------------------------------------

# The JPEG standard's example luminance quantization table (ITU T.81 Annex K), row by row.
_BASE_LUMA = (
    16, 11, 10, 16, 24, 40, 51, 61,
    12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56,
    14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77,
    24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101,
    72, 92, 95, 98, 112, 100, 103, 99,
)  # fmt: skip


def _zigzag() -> tuple[int, ...]:
    """Row-major position of each coefficient in the order a DQT segment lists them."""
    order: list[int] = []
    for diagonal in range(15):
        cells = [row * 8 + (diagonal - row) for row in range(8) if 0 <= diagonal - row < 8]
        order.extend(reversed(cells) if diagonal % 2 == 0 else cells)
    return tuple(order)


_ZIGZAG = _zigzag()


def _scaled_luma(quality: int) -> tuple[int, ...]:
    """The table libjpeg builds for ``quality`` (1..100)."""
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return tuple(min(255, max(1, (value * scale + 50) // 100)) for value in _BASE_LUMA)


@functools.cache
def _luma_tables() -> tuple[dict[int, tuple[int, ...]], dict[tuple[int, ...], int]]:
    """Every quality's table and back; built on first use (not at import: workers start faster)."""
    by_quality = {quality: _scaled_luma(quality) for quality in range(1, 101)}
    return by_quality, {table: quality for quality, table in by_quality.items()}


def _segments(data: bytes):
    """``(marker, payload)`` for each header segment of a JPEG, up to the start of scan."""
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xDA:
            return
        if marker in (0xD8, 0xD9) or 0xD0 <= marker <= 0xD7:
            pos += 2
            continue
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        if length < 2 or pos + 2 + length > len(data):
            return
        yield marker, data[pos + 4 : pos + 2 + length]
        pos += 2 + length


def _luma_table(data: bytes) -> tuple[int, ...] | None:
    """Quantization table 0 (else the first table) in row-major order, or None."""
    if data[:2] != b"\xff\xd8":
        return None
    first = None
    for marker, payload in _segments(data):
        if marker != 0xDB:
            continue
        pos = 0
        while pos < len(payload):
            precision, table_id = payload[pos] >> 4, payload[pos] & 0x0F
            pos += 1
            width = 2 if precision else 1
            if pos + 64 * width > len(payload):
                return first
            listed = [int.from_bytes(payload[pos + i * width : pos + (i + 1) * width], "big") for i in range(64)]
            pos += 64 * width
            table = [0] * 64
            for index, value in zip(_ZIGZAG, listed):
                table[index] = value
            if first is None:
                first = tuple(table)
            if table_id == 0:
                return tuple(table)
    return first


def estimate_jpeg_quality(data: bytes) -> int | None:
    """The libjpeg quality (1..100) whose luminance table is nearest to the file's; None if unknown."""
    table = _luma_table(data)
    if table is None:
        return None
    by_quality, by_table = _luma_tables()
    exact = by_table.get(table)
    if exact is not None:
        return exact
    # Nearest by absolute difference; on a tie the lower quality wins.
    return min(by_quality, key=lambda q: (sum(abs(a - b) for a, b in zip(table, by_quality[q])), q))


def _jpeg_within_cap(data: bytes, cap: int) -> bool:
    """Whether JPEG ``data`` may be kept under a quality cap (an unknown quality is kept)."""
    if data[:2] != b"\xff\xd8":
        return False
    quality = estimate_jpeg_quality(data)
    return quality is None or quality <= cap


def jpeg_has_exif(data: bytes) -> bool:
    """Whether a JPEG carries an EXIF block (an APP1 segment starting with ``Exif``)."""
    if data[:2] != b"\xff\xd8":
        return False
    return any(marker == 0xE1 and payload[:4] == b"Exif" for marker, payload in _segments(data))


def _original_jpeg(image: Any) -> bytes | None:
    """The bytes of the .jpg/.jpeg file a PIL image was opened from, if it still exists."""
    filename = getattr(image, "filename", None)
    if filename and os.path.isfile(filename) and str(filename).lower().endswith((".jpg", ".jpeg")):
        with open(filename, "rb") as handle:
            return handle.read()
    return None


def encode_image_wrapper(item: Any, default_format: str, *, force_jpeg: bool = False) -> tuple[bytes, str]:
    """Encode an Image/Jpeg wrapper's pixels, PIL image or file; returns bytes and extension.

    ``quality`` re-encodes at that quality; ``max_quality`` re-encodes as JPEG at the cap unless
    the input already is a JPEG at or below it; with neither (nor ``mode``/``format``) a file
    is stored untouched.
    """
    array = getattr(item, "array", None)
    image = getattr(item, "image", None)
    mode = getattr(item, "mode", None)
    quality = getattr(item, "quality", None)
    cap = getattr(item, "max_quality", None)
    requested = getattr(item, "format", None)
    encode_quality = quality if quality is not None else cap
    jpeg_only = force_jpeg or cap is not None

    def encode(pil: Any, fmt: str) -> tuple[bytes, str]:
        return save_pil(pil, "JPEG" if jpeg_only else fmt, quality=encode_quality, mode=mode)

    if image is not None or array is not None:
        if cap is not None and image is not None:
            original = _original_jpeg(image)
            if original is not None and _jpeg_within_cap(original, int(cap)):
                return original, "jpg"
        if image is not None:
            return encode(image, requested or native_format(image))
        return encode(pil_from_array(array), requested or default_format)
    data, ext = read_media_bytes(item)
    if quality is None and cap is None and mode is None and requested is None:
        return data, ext or default_format.lower()
    if cap is not None and _jpeg_within_cap(data, int(cap)):
        return data, ext or "jpg"
    return encode(pil_module().open(io.BytesIO(data)), requested or ext or default_format)


def _rgb_planes(image: Any) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The image's RGB pixels as a contiguous ``uint8`` array of shape (3, H, W).

    PIL packs one channel at a time (``tobytes("raw", "R")``), which costs less than packing the
    pixels as (H, W, 3) and transposing them with numpy (a copy with a 3-byte stride).
    """
    if image.mode != "RGB":
        image = image.convert("RGB")  # an RGB image would be copied for nothing
    width, height = image.size
    planes = np.empty((3, height, width), dtype=np.uint8)
    for channel, band in enumerate("RGB"):
        planes[channel] = np.frombuffer(image.tobytes("raw", band), dtype=np.uint8).reshape(height, width)
    return planes


def decode_image(data: Buffer, decode: str = "tensor") -> Any:
    """Decode the stored image file ``data`` as ``decode`` says.

    ``"tensor"``: RGB uint8 torch tensor (C, H, W), as upstream gives; ``"numpy"``: the same pixels
    as a numpy array; ``"pil"``: the PIL image (EXIF orientation applied, mode kept); ``"bytes"``.
    """
    raw = bytes(data)
    if decode == "bytes":
        return raw
    pil_image = pil_module()
    image = pil_image.open(io.BytesIO(raw))
    image.load()
    if jpeg_has_exif(raw):
        from PIL import ImageOps

        image = ImageOps.exif_transpose(image)
    if decode == "pil":
        return image
    pixels = _rgb_planes(image)
    if decode == "numpy":
        return pixels
    try:
        import torch
    except ImportError:
        raise ImportError(
            'decoding images to tensors needs torch (pip install torch); or read them with decode="pil"'
            ' or decode="numpy", e.g. serializers={"image": ImageSerializer(decode="pil")}'
        ) from None
    # torch leaves from_numpy's parameter untyped.
    return torch.from_numpy(pixels)  # pyright: ignore[reportUnknownMemberType]
