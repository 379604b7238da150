"""Which tests of a module this pytest process runs: for module fixtures that start their work early."""

from __future__ import annotations

from typing import Any

import pytest


def selected_params(request: pytest.FixtureRequest) -> list[tuple[str, dict[str, Any]]]:
    """Per parametrized test of the requesting module that this process runs, in order: its function's
    name and its parameters.

    The session's items are what is left after ``-k``/``-m`` selection; with ``--dist loadfile`` a
    module runs whole on one worker, so they are the tests this process will run.
    """
    return [
        (item.originalname, dict(item.callspec.params))
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.module is request.module and hasattr(item, "callspec")
    ]
