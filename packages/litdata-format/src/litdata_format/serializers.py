"""The built-in serializers, by the class names upstream LitData uses.

Subclass :class:`Serializer` for your own kinds of leaves and pass an instance by key
(``serializers={"my_kind": MySerializer()}``) to the writer and the reader.
"""

from litdata_format._media._av_serializers import AudioSerializer, VideoSerializer
from litdata_format._media._media_serializers import (
    FileSerializer,
    GraphSerializer,
    ImageSerializer,
    JPEGArraySerializer,
    JPEGSerializer,
    MeshSerializer,
    NiftiSerializer,
    PDFSerializer,
    PILSerializer,
    TextSerializer,
    TIFFSerializer,
)
from litdata_format._media._media_serializers import TypedNoHeaderTensorSerializer as NoHeaderTensorSerializer
from litdata_format._media._media_serializers import TypedTensorSerializer as TensorSerializer
from litdata_format._samples._registry import default_serializers, resolve_serializers
from litdata_format._samples._serializers import (
    BooleanSerializer,
    BytesSerializer,
    FloatSerializer,
    IntegerSerializer,
    JsonSerializer,
    NoHeaderNumpySerializer,
    NumpySerializer,
    PickleSerializer,
    Serializer,
    StringSerializer,
)

__all__ = [
    "AudioSerializer",
    "BooleanSerializer",
    "BytesSerializer",
    "FileSerializer",
    "FloatSerializer",
    "GraphSerializer",
    "ImageSerializer",
    "IntegerSerializer",
    "JPEGArraySerializer",
    "JPEGSerializer",
    "JsonSerializer",
    "MeshSerializer",
    "NiftiSerializer",
    "NoHeaderNumpySerializer",
    "NoHeaderTensorSerializer",
    "NumpySerializer",
    "PDFSerializer",
    "PILSerializer",
    "PickleSerializer",
    "Serializer",
    "StringSerializer",
    "TIFFSerializer",
    "TensorSerializer",
    "TextSerializer",
    "VideoSerializer",
    "default_serializers",
    "resolve_serializers",
]
