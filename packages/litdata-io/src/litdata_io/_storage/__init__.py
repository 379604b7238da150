"""Storage: the interface, the backends (local, obstore, fsspec), retries, settings and credentials."""
