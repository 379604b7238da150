"""Item loaders and reading a dataset back: where sample N is, and its chunk opened.

- ``_item_loaders``: how samples sit in chunks (PyTree, Tokens); ``_parquet``: Parquet files as chunks.
- ``_sample_map``: sample index -> (chunk, position); ``_opener``: a chunk opened once, a few kept open;
  ``_gather``: whole batches read as arrays.
- ``_dataset_reader``: ``DatasetReader`` and ``loader_for``, the loader an index is read with by default.
"""
