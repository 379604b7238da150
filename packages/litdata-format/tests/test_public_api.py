"""The lazy re-exporting modules (litdata_format.lazy): names written once, loaded on first use.

The user API itself is pinned against the package README by tests/test_layering.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _run(code: str, *paths: Path) -> str:
    """What a fresh interpreter running ``code`` (with ``paths`` first on sys.path) prints, errors included."""
    prefix = f"import sys; sys.path[:0] = {[str(p) for p in paths]!r}\n"
    done = subprocess.run([sys.executable, "-c", prefix + code], check=False, capture_output=True, text=True)
    return (done.stdout + done.stderr).strip()


def test_names_load_their_module_on_first_use() -> None:
    code = (
        "import sys, litdata_format, litdata_format.internal as internal\n"
        "assert 'numpy' not in sys.modules and 'litdata_format._writer' not in sys.modules\n"
        "internal.write_file_atomic\n"
        "assert 'numpy' not in sys.modules\n"
        "litdata_format.BinaryWriter\n"
        "assert 'litdata_format._writer' in sys.modules\n"
        "from litdata_format import *\n"
        "print(sorted(set(dir(litdata_format)) & set(litdata_format.__all__)) == sorted(litdata_format.__all__))\n"
    )
    assert _run(code) == "True"


def test_a_name_is_the_one_object_of_its_module() -> None:
    import litdata_format
    import litdata_format.internal
    from litdata_format import _atomic, _writer

    assert litdata_format.BinaryWriter is _writer.BinaryWriter
    assert litdata_format.internal.write_file_atomic is _atomic.write_file_atomic
    assert (
        "__version__" in vars(litdata_format)["__all__"]
        and "__version__" not in vars(litdata_format.internal)["__all__"]
    )


def test_an_unknown_name_is_an_attribute_error() -> None:
    import litdata_format

    with pytest.raises(AttributeError, match="module 'litdata_format' has no attribute 'write_file_atomic'"):
        litdata_format.write_file_atomic  # noqa: B018  # pyright: ignore[reportAttributeAccessIssue]


def _package(root: Path, block: str) -> Path:
    package = root / "lazypkg"
    package.mkdir()
    (package / "_impl.py").write_text("def one():\n    return 1\n\n\ndef two():\n    return 2\n")
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n\nfrom litdata_format.lazy import lazy_module\n\n"
        f"if TYPE_CHECKING:\n{block}\n__getattr__, __dir__ = lazy_module(globals())\n"
    )
    return root


def test_the_type_checking_block_is_the_only_list(tmp_path: Path) -> None:
    root = _package(tmp_path, "    from lazypkg._impl import one as one\n    from lazypkg._impl import two as two\n")
    code = "import lazypkg\nprint(lazypkg.__all__, lazypkg.one(), lazypkg.two(), 'two' in dir(lazypkg))"
    assert _run(code, root) == "['one', 'two'] 1 2 True"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("    from lazypkg._impl import one\n", "write `one as one`"),
        ("    from lazypkg._impl import one as uno\n", "write `one as one`"),
        ("    import lazypkg._impl\n", "only `from package.module import name as name` lines"),
    ],
)
def test_a_block_it_cannot_read_fails_naming_the_line(tmp_path: Path, block: str, message: str) -> None:
    root = _package(tmp_path, block)
    out = _run("import lazypkg\nlazypkg.one", root)
    assert "ImportError" in out and "lazypkg/__init__.py:6" in out and message in out, out
