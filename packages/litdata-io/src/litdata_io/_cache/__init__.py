"""The local chunk cache: chunk files fetched (and prefetched) into a folder under a byte cap, and its locks."""
