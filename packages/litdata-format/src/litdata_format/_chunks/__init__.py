"""Chunk files: their layouts, and what is done to a chunk's bytes (compression, encryption, checksums).

- ``_chunk``: this library's layout (``u32 N | u32 offsets[N+1] | item bytes``); ``_layouts`` opens a
  chunk file in whichever layout it has.
- Upstream 0.2.76's other layouts: ``_framed`` (in-file zstd), ``_arrow_rows`` / ``_arrow_write`` with
  ``_arrow_ipc`` (Arrow rows), and ``_mds`` (MosaicML Streaming datasets read in place).
- ``_compression``, ``_encryption``, ``_checksum``: a chunk's bytes on their way to and from the file.
"""
