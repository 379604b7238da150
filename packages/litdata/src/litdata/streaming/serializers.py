"""Upstream's ``litdata.streaming.serializers`` import path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_format.serializers import AudioSerializer as AudioSerializer
    from litdata_format.serializers import BooleanSerializer as BooleanSerializer
    from litdata_format.serializers import BytesSerializer as BytesSerializer
    from litdata_format.serializers import FileSerializer as FileSerializer
    from litdata_format.serializers import FloatSerializer as FloatSerializer
    from litdata_format.serializers import GraphSerializer as GraphSerializer
    from litdata_format.serializers import ImageSerializer as ImageSerializer
    from litdata_format.serializers import IntegerSerializer as IntegerSerializer
    from litdata_format.serializers import JPEGArraySerializer as JPEGArraySerializer
    from litdata_format.serializers import JPEGSerializer as JPEGSerializer
    from litdata_format.serializers import JsonSerializer as JsonSerializer
    from litdata_format.serializers import MeshSerializer as MeshSerializer
    from litdata_format.serializers import NiftiSerializer as NiftiSerializer
    from litdata_format.serializers import NoHeaderNumpySerializer as NoHeaderNumpySerializer
    from litdata_format.serializers import NoHeaderTensorSerializer as NoHeaderTensorSerializer
    from litdata_format.serializers import NumpySerializer as NumpySerializer
    from litdata_format.serializers import PDFSerializer as PDFSerializer
    from litdata_format.serializers import PickleSerializer as PickleSerializer
    from litdata_format.serializers import PILSerializer as PILSerializer
    from litdata_format.serializers import Serializer as Serializer
    from litdata_format.serializers import StringSerializer as StringSerializer
    from litdata_format.serializers import TensorSerializer as TensorSerializer
    from litdata_format.serializers import TextSerializer as TextSerializer
    from litdata_format.serializers import TIFFSerializer as TIFFSerializer
    from litdata_format.serializers import VideoSerializer as VideoSerializer
    from litdata_format.serializers import default_serializers as default_serializers
    from litdata_format.serializers import resolve_serializers as resolve_serializers

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
