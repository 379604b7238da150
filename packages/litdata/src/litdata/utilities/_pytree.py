"""Upstream's ``litdata.utilities._pytree`` import path, for registering namedtuples.

Upstream code registers a namedtuple with ``_register_namedtuple(Point, serialized_type_name=...)``
before writing or reading it; the same call registers it here (see docs/format.md).
"""

from litdata_format import register_namedtuple as _register_namedtuple

__all__ = ["_register_namedtuple"]
