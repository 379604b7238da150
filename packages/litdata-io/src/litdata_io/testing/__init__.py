"""The conformance suite of :class:`litdata_io.Storage`: the behaviour every backend must have, as pytest tests.

A backend's test module subclasses :class:`StorageConformance` and provides a ``storage_factory``
fixture (see the class). Importing this module imports nothing more; the suite itself needs pytest
(``pip install "litdata-io[testing]"``) and loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litdata_format.lazy import lazy_module

if TYPE_CHECKING:
    from litdata_io.testing._conformance import StorageConformance as StorageConformance
    from litdata_io.testing._conformance import StorageFactory as StorageFactory

__getattr__, __dir__ = lazy_module(globals())
