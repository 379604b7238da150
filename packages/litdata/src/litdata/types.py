"""Upstream's ``litdata.types`` import path: the typed media wrappers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_format import Audio as Audio
    from litdata_format import File as File
    from litdata_format import Graph as Graph
    from litdata_format import Image as Image
    from litdata_format import Jpeg as Jpeg
    from litdata_format import JpegArray as JpegArray
    from litdata_format import Mesh as Mesh
    from litdata_format import Nifti as Nifti
    from litdata_format import Pdf as Pdf
    from litdata_format import Pil as Pil
    from litdata_format import Tensor as Tensor
    from litdata_format import Text as Text
    from litdata_format import Tiff as Tiff
    from litdata_format import Video as Video

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there too
    __getattr__, __dir__ = lazy_module(globals())
