"""Upstream's ``litdata.raw.indexer`` import path."""

from litdata_raw import BaseIndexer, FileIndexer, FileMetadata

__all__ = ["BaseIndexer", "FileIndexer", "FileMetadata"]
