"""Context on a user's exception, without changing its type (so ``except ValueError`` still catches it)."""

from __future__ import annotations

__all__ = ["add_note"]


def add_note(error: BaseException, note: str) -> None:
    """Add ``note`` to ``error``'s traceback, as ``BaseException.add_note`` does (Python 3.11+).

    Python 3.10 has no ``add_note``: the note is kept in ``__notes__`` (which 3.11 would print) and
    not shown there, rather than replacing the user's error with an ``AttributeError``.
    """
    adder = getattr(error, "add_note", None)
    if adder is not None:
        adder(note)
    else:
        error.__notes__ = [*getattr(error, "__notes__", ()), note]  # pyright: ignore[reportAttributeAccessIssue]
