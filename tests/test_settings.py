"""Every ``LITDATA_*`` variable is read in one place, refused naming itself, and listed in docs/settings.md."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from litdata_format._environment import VARIABLES, read_count, read_flag, read_seconds, read_size
from litdata_io._cache._stall import download_stall_seconds, download_stall_warn_seconds
from litdata_io._storage._settings import IOSettings

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "packages").glob("*/src/**/*.py")) + sorted((ROOT / "tools").glob("*/src/**/*.py"))
NAME = re.compile(r"\bLITDATA_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_variable_the_packages_name_is_listed() -> None:
    named = {name for path in SOURCES for name in NAME.findall(path.read_text())}
    named = {name for name in named if not name.startswith("LITDATA_TEST_")}
    assert named - set(VARIABLES) == set()
    assert set(VARIABLES) - named == set()  # nothing listed that no package reads


def test_no_package_reads_a_variable_itself() -> None:
    reads = re.compile(r"(?:environ\.get|environ\[|getenv)\(?\s*[\"']LITDATA_")
    found = [f"{path.relative_to(ROOT)}" for path in SOURCES if reads.search(path.read_text())]
    assert found == []


@pytest.mark.parametrize(
    ("name", "value", "read"),
    [
        ("LITDATA_IO_TIMEOUT", "0", IOSettings.from_options),
        ("LITDATA_IO_MAX_RETRIES", "-3", IOSettings.from_options),
        ("LITDATA_IO_PART_SIZE", "big", IOSettings.from_options),
        ("LITDATA_DOWNLOAD_STALL_S", "-5", download_stall_seconds),
        ("LITDATA_DOWNLOAD_STALL_S", "abc", download_stall_seconds),
        ("LITDATA_DOWNLOAD_STALL_WARN_S", "nan", download_stall_warn_seconds),
    ],
)
def test_a_wrong_value_is_refused_naming_the_variable_and_what_it_takes(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: Callable[[], object]
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as caught:
        read()
    message = str(caught.value)
    assert f"{name}={value!r} is refused: it takes {VARIABLES[name].accepts}" in message, message


_READERS = {"a number of seconds": read_seconds, "a whole number": read_count, "a size": read_size, "1/true": read_flag}
_CHECKED = {
    name: reader
    for name, variable in VARIABLES.items()
    for start, reader in _READERS.items()
    if variable.accepts.startswith(start)
}


@pytest.mark.parametrize("name", sorted(_CHECKED))
def test_every_numeric_or_yes_no_variable_refuses_what_it_does_not_take(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    reader = _CHECKED[name]
    for bad in ("-5", "abc", "inf"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=re.escape(f"{name}={bad!r} is refused")):
            reader(name)
    monkeypatch.setenv(name, "  ")
    assert reader(name) is None  # blank is unset


def test_the_stall_limits_default_to_a_warning_at_10_s_and_a_takeover_at_30_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITDATA_DOWNLOAD_STALL_S", raising=False)
    monkeypatch.delenv("LITDATA_DOWNLOAD_STALL_WARN_S", raising=False)
    assert (download_stall_warn_seconds(), download_stall_seconds()) == (10.0, 30.0)


def test_the_docs_table_lists_every_variable_with_its_default() -> None:
    table = (ROOT / "docs" / "settings.md").read_text()
    for variable in VARIABLES.values():
        row = f"| `{variable.name}` | {variable.package} | `{variable.default}` | {variable.accepts} |"
        assert row in table, row
    assert "docs/settings.md" in (ROOT / "README.md").read_text()
