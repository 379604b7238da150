"""The built-in serializers in upstream's matching order, and merging in the user's own."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

from litdata_format._media import _av_serializers as av
from litdata_format._media import _media_serializers as m
from litdata_format._samples import _serializers as s
from litdata_format._samples._serializers import Serializer

__all__ = ["default_serializers", "lookup_serializer", "resolve_serializers", "serializer_for_format"]

# The order decides which serializer claims a leaf: the first whose can_serialize accepts it.
# It matches upstream LitData 0.2.76, so the same sample gets the same data_format here and there.
_FACTORIES: tuple[tuple[str, Callable[[], Serializer]], ...] = (
    ("str", s.StringSerializer),
    ("text", m.TextSerializer),
    ("bool", s.BooleanSerializer),
    ("int", s.IntegerSerializer),
    ("float", s.FloatSerializer),
    ("video", av.VideoSerializer),
    ("audio", av.AudioSerializer),
    ("image", m.ImageSerializer),
    ("nifti", m.NiftiSerializer),
    ("mesh", m.MeshSerializer),
    ("pdf", m.PDFSerializer),
    ("graph", m.GraphSerializer),
    ("tifffile", m.TIFFSerializer),
    ("file", m.FileSerializer),
    ("pil", m.PILSerializer),
    ("jpeg", m.JPEGSerializer),
    ("jpeg_array", m.JPEGArraySerializer),
    ("bytes", s.BytesSerializer),
    ("no_header_numpy", s.NoHeaderNumpySerializer),
    ("numpy", s.NumpySerializer),
    ("no_header_tensor", m.TypedNoHeaderTensorSerializer),
    ("tensor", m.TypedTensorSerializer),
    ("json", s.JsonSerializer),
    ("pickle", s.PickleSerializer),
)


def default_serializers() -> dict[str, Serializer]:
    """Fresh instances of the built-in serializers, keyed by name, in matching order."""
    return {name: factory() for name, factory in _FACTORIES}


def resolve_serializers(user: Mapping[str, Serializer] | None = None) -> dict[str, Serializer]:
    """The ``user``'s serializers by name first (in their order), then the built-ins they do not replace.

    Raises:
        TypeError: a value of ``user`` is not a :class:`Serializer` instance.
    """
    merged: dict[str, Serializer] = {}
    for name, serializer in (user or {}).items():
        # Typed, yet checked: a class instead of an instance is an easy mistake to make.
        if not isinstance(serializer, Serializer):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"serializers[{name!r}] is a {type(serializer).__name__}; it must be a "
                "litdata_format.Serializer instance"
            )
        merged[name] = serializer
    for name, serializer in default_serializers().items():
        merged.setdefault(name, serializer)
    return merged


# Names upstream writes that its reader knows under another key.
_ALIASES = {"tiff": "tifffile"}


def lookup_serializer(data_format: str, serializers: Mapping[str, Serializer]) -> Serializer | None:
    """The registered serializer a data_format entry names (``name`` or ``name:arg``), if any."""
    name = data_format.split(":", 1)[0]
    return serializers.get(name, serializers.get(_ALIASES.get(name, name)))


def serializer_for_format(data_format: str, serializers: Mapping[str, Serializer]) -> Serializer:
    """A private, set-up copy of the serializer a data_format entry names (``name`` or ``name:arg``)."""
    found = lookup_serializer(data_format, serializers)
    if found is None:
        name = data_format.split(":", 1)[0]
        raise ValueError(
            f"the dataset uses the serializer {name!r} (data_format entry {data_format!r}), which is "
            f"not registered here; known: {', '.join(serializers)}. Pass serializers={{{name!r}: ...}}"
        )
    serializer = copy.copy(found)
    serializer.setup(data_format)
    return serializer
