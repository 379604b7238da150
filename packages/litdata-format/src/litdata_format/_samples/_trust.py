"""Reading data you did not write: refusing pickled leaves unless unpickling is allowed.

Unpickling runs whatever code the bytes name, so a dataset holding pickled leaves (the
``pickle`` serializer, ``graph`` leaves, MDS ``pkl`` columns) can run code in the reader's
process. Readers decide once, when their item loader is set up, whether that is allowed:
``allow_pickle=`` on the reader, else the ``LITDATA_ALLOW_PICKLE`` environment variable, else
allowed (as upstream LitData reads them). Writers warn when they store pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litdata_format._environment import read_flag
from litdata_format._guards import is_any_list
from litdata_format._index._dataset_index import DatasetIndex
from litdata_format._samples._serializers import Serializer

__all__ = [
    "ALLOW_PICKLE_ENV",
    "PickleRefusedError",
    "PickleWriteWarning",
    "check_pickle_allowed",
    "readable_leaf_paths",
    "pickle_allowed",
    "unpickles",
]

ALLOW_PICKLE_ENV = "LITDATA_ALLOW_PICKLE"


class PickleRefusedError(ValueError):
    """A dataset stores pickled values and reading them was not allowed."""


class PickleWriteWarning(UserWarning):
    """A writer stored a leaf with pickle: readers that refuse pickle cannot read the dataset."""


def pickle_allowed(allow_pickle: bool | None = None) -> bool:
    """Whether unpickling is allowed: ``allow_pickle`` if given, else ``LITDATA_ALLOW_PICKLE``, else True."""
    if allow_pickle is not None:
        return bool(allow_pickle)
    setting = read_flag(ALLOW_PICKLE_ENV)
    return True if setting is None else setting


def unpickles(serializer: Any) -> bool:
    """True for a serializer whose ``deserialize`` calls ``pickle.loads`` on the stored bytes."""
    return bool(getattr(serializer, "unpickles", False))


def readable_leaf_paths(data_spec: Any, count: int) -> list[str]:
    """A readable path for each leaf (``['label']``, ``[1]``), or plain numbers if the spec is unreadable."""
    from litdata_format._samples._pytree import TreeSpec, leaf_paths

    try:
        paths = leaf_paths(data_spec if isinstance(data_spec, TreeSpec) else TreeSpec.from_json(data_spec))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        paths = []
    if len(paths) != count:
        return [str(i) for i in range(count)]
    return [path or "the sample itself" for path in paths]


def check_pickle_allowed(index: DatasetIndex, serializers: Mapping[str, Serializer], allow_pickle: bool | None) -> None:
    """Refuse a dataset with pickled leaves or columns unless unpickling is allowed.

    Raises:
        PickleRefusedError: naming the leaf or column, a chunk holding it, index.json and the switch.
    """
    if pickle_allowed(allow_pickle) or not index.chunks:
        return
    formats = index.data_format
    columns = index.config.get("column_names")
    if index.config.get("format") == "mds" and is_any_list(columns):
        found = [(f"column {name!r}", fmt) for name, fmt in zip(columns, formats) if fmt == "pkl"]
    else:
        paths = readable_leaf_paths(index.config.get("data_spec"), len(formats))
        found = [(f"leaf {path}", fmt) for path, fmt in zip(paths, formats) if unpickles(_serializer(fmt, serializers))]
    if found:
        what, fmt = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise PickleRefusedError(
            f"{index.source}: {what}{more} is stored as {fmt!r}, which is read with pickle, in chunk "
            f"{index.chunks[0].filename} and every other chunk; unpickling runs code from the data, and "
            f"it is refused (allow_pickle=False or {ALLOW_PICKLE_ENV}=0). If you trust who wrote this "
            f"dataset, pass allow_pickle=True or set {ALLOW_PICKLE_ENV}=1"
        )


def _serializer(data_format: Any, serializers: Mapping[str, Serializer]) -> Serializer | None:
    from litdata_format._samples._registry import lookup_serializer

    return lookup_serializer(str(data_format), serializers)
