"""Finding a sample by its key: the key index ``optimize(key_fn=...)`` writes (``keys/shard-*.parquet``).

The whole index is read once per dataset object into a dict (key -> sample position); a remote
dataset's shards are fetched directly, not through the chunk cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litdata_format.internal import KEYS_FILE, read_keys

__all__ = ["load_keys"]

_LEGACY = "keys.parquet"  # upstream's single-file key index before the keys/ folder


def load_keys(input_dir: Any, storage_options: Any = None, session_options: Any = None) -> dict[str | int, int]:
    """Key -> sample position for the dataset at ``input_dir``.

    Raises:
        KeyError: the dataset has no key index (it was not written with ``key_fn``).
    """
    from litdata_io import get_storage, resolve_dir

    resolved = resolve_dir(input_dir)
    folder = KEYS_FILE.partition("/")[0]
    files: list[bytes] = []
    if resolved.url is None:
        root = Path(resolved.path or ".")
        where = str(root)
        paths = sorted((root / folder).glob("shard-*.parquet")) or [p for p in [root / _LEGACY] if p.is_file()]
        files = [p.read_bytes() for p in paths]
    else:
        storage = get_storage(resolved.url, storage_options, session_options)
        where = storage.url
        names = sorted(i.key for i in storage.list(folder + "/") if i.key.rpartition("/")[2].startswith("shard-"))
        if not names and storage.exists(_LEGACY):
            names = [_LEGACY]
        files = [storage.get(name) for name in names]
    if not files:
        raise KeyError(
            f"{where} has no key index ({KEYS_FILE}); write the dataset with optimize(..., key_fn=...) to look "
            "samples up by key"
        )
    return read_keys(files, f"{where}/{folder}")
