"""Whether anything in this process observes the pipeline: one flag the probe reads per call.

The tracer sets ``tracing`` when its categories change, the activity board sets ``activity`` when
a slot is attached or detached, and the probe keeps its listeners here; ``quiet`` is true when
none of them is on, and is all :mod:`litdata_io._instrument._probe` reads on a site that nothing
observes. It lives apart so the tracer and the board can set it without importing the probe.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["SWITCHES", "Switches"]


class Switches:
    """The observers on in this process (see the module's docstring)."""

    __slots__ = ("activity", "listeners", "quiet", "tracing")

    def __init__(self) -> None:
        self.tracing = False
        self.activity = False
        # Objects with ``event(name, phase, args: Mapping[str, object])`` (``_instrument.Listener``).
        self.listeners: tuple[Any, ...] = ()
        self.quiet = True

    def update(self) -> None:
        """Recompute ``quiet`` after a field changed."""
        self.quiet = not (self.tracing or self.activity or self.listeners)


SWITCHES: Final = Switches()
