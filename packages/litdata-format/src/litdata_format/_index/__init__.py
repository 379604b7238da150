"""``index.json``: the parsed index, the file (names, reading, writing, merging), its fast readers, the key index."""
