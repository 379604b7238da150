"""The local chunk cache: a dataset's chunk files fetched into a folder under a byte cap.

- ``_chunk_cache``: ``ChunkCache``, fetching, pinning and evicting one dataset's chunks.
- ``_prefetch``: a worker's chunks fetched ahead of its reader.
- ``_ledger``: the folder's byte count; ``_disk``: the byte budget and a full disk.
- ``_locks``: pins and per-chunk download locks; ``_stall``: waiting for, or taking over, another
  process's download.
- ``_versions``: one subfolder per dataset version; ``_clear``: the whole cache, as ``litdata cache`` sees it.
"""
