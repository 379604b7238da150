"""Chunk files: their layouts (ours, upstream's framed and Arrow rows, MDS) and compression, encryption, checksums."""
