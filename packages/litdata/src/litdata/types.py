"""Upstream's ``litdata.types`` import path: the typed media wrappers."""

from litdata_format import Audio, File, Graph, Image, Jpeg, JpegArray, Mesh, Nifti, Pdf, Pil, Tensor, Text, Tiff, Video

__all__ = [
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
]
