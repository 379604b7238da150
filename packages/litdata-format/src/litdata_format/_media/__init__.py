"""Media leaves: the typed wrappers (``Image``, ``Video``, ``Graph``, ...) and their serializers.

- ``_wrappers``: what a leaf is; ``_media_serializers``: images, files, meshes, tensors;
  ``_av_serializers``: audio and video; ``_image_codec``: Pillow, loaded lazily; ``_graph_pack``: PyG graphs.
"""
