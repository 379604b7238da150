"""Item loaders and reading a dataset back: where sample N is, its chunk opened, the default loader of an index."""
