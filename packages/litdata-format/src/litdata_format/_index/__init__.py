"""``index.json``: the dataset's table of contents, and the key index beside it.

- ``_dataset_index``: the parsed index (``DatasetIndex``, its ``ChunkTable``) and the checks of single fields.
- ``_index_json``: the file itself: its names, reading, validating, writing atomically, merging.
- ``_scan``: the ``chunks`` list scanned as bytes; ``_skim``: the top level read value by value.
- ``_key_index``: ``keys/shard-*.parquet``, a sample's key -> its position.
"""
